"""Reading the offline judges' model files: packaged or given, checked, with their sha256.

A model file is a JSON object with a ``format`` and the ``features`` it was fitted on; both
learned offline judges refuse a file of another format or feature list, and put the file's
sha256 in their identity so caches never mix two models.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ...errors import JudgeConfigurationError


def read_model_file(
    path: str | os.PathLike[str] | None, packaged: str, kind: str
) -> tuple[dict[str, Any], str, str]:
    """The JSON object at ``path`` (default: the packaged file ``packaged``), the sha256 of its
    bytes, and how to name it in errors; ``kind`` names the judge, e.g. "pool-judge"."""
    if path is None:
        source = f"the packaged model {packaged}"
        try:
            raw = resources.files("sag2_retrievers").joinpath(packaged).read_bytes()
        except OSError as error:
            raise JudgeConfigurationError(
                f"{source} cannot be read; reinstall sag2-retrievers"
            ) from error
    else:
        try:
            raw = Path(path).read_bytes()
        except OSError as error:
            raise JudgeConfigurationError(f"cannot read the {kind} model {path}") from error
        source = f"the model file {path}"
    try:
        payload = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise JudgeConfigurationError(f"{source} is not valid JSON") from error
    if not isinstance(payload, dict):
        raise JudgeConfigurationError(f"{source} is not a JSON object")
    return payload, hashlib.sha256(raw).hexdigest(), source


def check_header(
    payload: Mapping[str, Any], source: str, model_format: str, features: Sequence[str], fit: str
) -> None:
    """Refuse a model of another format, or one fitted on other features (refit with ``fit``)."""
    if payload.get("format") != model_format:
        raise JudgeConfigurationError(f"{source} is not a model of format {model_format!r}")
    if tuple(payload.get("features", ())) != tuple(features):
        raise JudgeConfigurationError(
            f"{source} was fitted on other features than this version computes; refit it with {fit}"
        )
