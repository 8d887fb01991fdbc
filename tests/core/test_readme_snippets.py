"""Every README's python blocks run as written, its commands name files a clone has, its links
work on PyPI (absolute, pointing at files that exist)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import shlex
import warnings
from pathlib import Path

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/sag2-retrievers/sag2-retrievers"
READMES = [
    ROOT / "README.md",
    ROOT / "integrations" / "llama-index-retrievers-sag2" / "README.md",
    ROOT / "integrations" / "langchain-sag2" / "README.md",
]
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def blocks(readme: Path, language: str) -> list[str]:
    """The fenced blocks of one language, in order."""
    return [code for lang, code in _BLOCK.findall(readme.read_text()) if lang == language]


def sample_folder(folder: Path) -> None:
    """The ``./data`` folder the LlamaIndex README reads: a small two-hop corpus."""
    folder.mkdir()
    (folder / "eiffel_tower.md").write_text(
        "# Eiffel Tower\n\nThe Eiffel Tower was designed by the engineer Gustave Eiffel.\n"
    )
    (folder / "gustave_eiffel.txt").write_text("Gustave Eiffel was born in Dijon in 1832.\n")


def empty_results(code: str, namespace: dict[str, object]) -> list[str]:
    """The names a block assigns at its top level that hold nothing to show: an empty list of
    results, or a query engine's "Empty Response" (a README example must return something)."""
    assigned = [
        target.id
        for statement in ast.parse(code).body
        if isinstance(statement, (ast.Assign, ast.AnnAssign))
        for target in (
            statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        )
        if isinstance(target, ast.Name)
    ]
    return [
        name
        for name in dict.fromkeys(assigned)
        if (isinstance(namespace.get(name), list) and not namespace[name])
        or str(namespace.get(name)) == "Empty Response"
    ]


@pytest.mark.parametrize("readme", READMES, ids=lambda path: str(path.relative_to(ROOT)))
def test_python_blocks_run_as_written(
    readme: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks of one README run in order in one namespace (later ones use earlier names),
    and every list of results or response a block assigns holds something."""
    monkeypatch.chdir(tmp_path)
    sample_folder(tmp_path / "data")
    namespace: dict[str, object] = {"__name__": "__readme__"}
    code_blocks = blocks(readme, "python")
    assert code_blocks, f"{readme} has no python block"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for number, code in enumerate(code_blocks, start=1):
            compiled = compile(
                code, f"{readme.name} block {number}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            )
            outcome = eval(compiled, namespace)  # top-level await makes a coroutine
            if inspect.iscoroutine(outcome):
                asyncio.run(outcome)
            assert empty_results(code, namespace) == [], f"{readme.name} block {number}"
    for value in list(namespace.values()):
        close = getattr(value, "close", None)
        if callable(close) and type(value).__name__ == "SAG2Retriever":
            close()


def test_the_readme_index_commands_run_on_files_a_clone_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sag2 index` lines run verbatim; other commands' input files exist in the repository."""
    monkeypatch.chdir(tmp_path)
    for name in ("sag2_retrievers", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    lines = [
        line.split("#", 1)[0]
        for block in blocks(ROOT / "README.md", "bash")
        for line in block.splitlines()
        if line.startswith("sag2 ")
    ]
    inputs = [_input_of(shlex.split(line)[1:]) for line in lines]
    assert [path for path in inputs if path and not (ROOT / path).exists()] == []
    indexed = [shlex.split(line)[1:] for line in lines if line.startswith("sag2 index ")]
    assert indexed
    for argv in indexed:
        assert main([*argv, "--quiet"]) == 0, capsys.readouterr().err
        with SQLiteIndex(tmp_path / argv[argv.index("--db") + 1], create=False) as index:
            assert index.document_count() > 0


def test_the_readme_query_commands_return_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every `sag2 query` line runs verbatim on the indexes its `sag2 index` lines build and
    prints at least one ranked result."""
    monkeypatch.chdir(tmp_path)
    for name in ("sag2_retrievers", "docs"):
        (tmp_path / name).symlink_to(ROOT / name)
    commands = [
        shlex.split(line.split("#", 1)[0])[1:]
        for block in blocks(ROOT / "README.md", "bash")
        for line in block.splitlines()
        if line.startswith(("sag2 index ", "sag2 query "))
    ]
    queries = [argv for argv in commands if argv[0] == "query"]
    assert queries
    for argv in commands:
        code = main([*argv, "--quiet"])
        out, err = capsys.readouterr()
        assert code == 0, err
        if argv[0] == "query":
            assert re.search(r"^ +1\. \[", out, re.MULTILINE), f"no result for {argv}:\n{out}"


def _input_of(argv: list[str]) -> str | None:
    """The file a command reads (index and eval: the positional argument)."""
    return argv[1] if argv[0] in ("index", "eval") else None


@pytest.mark.parametrize("readme", READMES[1:], ids=lambda path: path.parent.name)
def test_integration_readme_links_are_absolute_and_point_at_existing_files(readme: Path) -> None:
    """PyPI shows these READMEs outside the repository: relative links would break there."""
    links = _LINK.findall(readme.read_text())
    assert [link for link in links if not link.startswith(("https://", "http://", "#"))] == []
    prefix = f"{REPOSITORY}/blob/main/"
    for link in links:
        if link.startswith(prefix):
            assert (ROOT / link.removeprefix(prefix)).exists(), link
