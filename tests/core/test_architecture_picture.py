"""docs/architecture.md's picture names every module the import-linter contract layers, in
the contract's order, so the picture and the checked contract cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def contract_layers() -> list[list[str]]:
    """The layers contract's layers, top first, each as its modules' last names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [[m.strip().rsplit(".", 1)[-1] for m in re.split(r"[|:]", layer)] for layer in layers]


def picture_rows() -> list[str]:
    """The picture's bands (text between its horizontal rules), top first."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    picture = text.split("```")[1]
    return re.split(r"\n\s*─+\n", picture)


def test_each_band_below_the_integrations_draws_one_contract_layer_in_order() -> None:
    bands = picture_rows()[1:]  # the first band is the integrations, outside the package
    layers = contract_layers()
    assert len(bands) == len(layers)
    for band, layer in zip(bands, layers, strict=True):
        missing = [m for m in layer if not re.search(rf"\b{m}\b", band)]
        assert not missing, f"{missing} not drawn in the band {band.split()[0]!r}"
