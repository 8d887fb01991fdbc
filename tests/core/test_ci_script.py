"""`.ci/run` tests what a new user gets (issue 23, item 1): a fresh virtualenv without the
machine's packages, the lint and type gates from that venv, then the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / ".ci" / "run").read_text()


def readme_test_command() -> str:
    """The README's two-command install-and-test line."""
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"^pip install .*&& python -m pytest$", readme, re.MULTILINE)
    return command


def test_ci_makes_a_fresh_virtualenv_without_system_packages() -> None:
    assert re.search(r'-m venv "\$venv_root/venv"', SCRIPT)
    assert "system-site-packages" not in SCRIPT
    assert 'source "$venv_root/venv/bin/activate"' in SCRIPT


def test_ci_runs_the_readme_test_command_verbatim_after_the_gates_inside_the_venv() -> None:
    lines = SCRIPT.splitlines()
    activated = lines.index('source "$venv_root/venv/bin/activate"')
    command = lines.index(readme_test_command())
    gates = [lines.index(gate) for gate in ("ruff check .", "ruff format --check .")]
    assert activated < min(gates) and max(gates) < command
    assert any(line.startswith("mypy sag2_retrievers") for line in lines[activated:command])
