"""The project's exception hierarchy: one base class, a few precise subclasses."""

from __future__ import annotations


class SAG2Error(Exception):
    """Base class of every error this package raises on purpose."""


class InvalidInputError(SAG2Error, ValueError):
    """A question, document, filter or parameter given by the caller is malformed."""


class IndexSettingsMismatchError(SAG2Error):
    """An existing index file was built with settings that differ from the ones requested."""


class IndexUnavailableError(SAG2Error):
    """SQLite lacks a feature the index needs (FTS5), or the file is not a SAG2 index."""


class IndexBusyError(IndexUnavailableError):
    """Another process held the index file's write lock for longer than the busy timeout."""


class IndexFullError(SAG2Error):
    """The disk, or a size limit on the index file, is full: the write was rolled back."""


class IngestError(SAG2Error):
    """Analysis for an ingest did not finish: a worker process died or did not answer in time."""


class JudgeError(SAG2Error):
    """A judge could not produce valid scores: refused, malformed answer, retries exhausted."""


class JudgeConfigurationError(JudgeError):
    """A judge is missing configuration, such as an API key or an optional dependency."""


class RemoteJudgeRefusedError(JudgeConfigurationError):
    """A judge that sends text off the machine was requested while remote judges are disallowed."""
