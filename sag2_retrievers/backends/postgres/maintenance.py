"""Keeping a PostgreSQL index: creating its schema, checking settings and layout, optimising."""

from __future__ import annotations

from ...errors import IndexUnavailableError
from ...settings import IndexSettings, reconcile_settings
from . import compaction
from . import schema as pg
from .transactions import PostgresConnections

# A meta row naming how postings are stored; schemas built before posting blocks lack it.
_LAYOUT = ("postings_layout", "blocks-1")


class PostgresMaintenance(PostgresConnections):
    """Create the schema or check the stored settings and layout; merge segments on request."""

    def _open(self, requested: IndexSettings | None, create: bool) -> IndexSettings:
        """Check the stored settings (a read, so read replicas open), or create the schema."""
        stored = self._stored_meta()
        if self._on_standby():
            self._log_replay_lag()
        if stored:
            if stored.get(_LAYOUT[0]) != _LAYOUT[1]:
                raise IndexUnavailableError(
                    f"PostgreSQL schema {self.schema!r} was built by an older sag2-retrievers "
                    "(postings rows, not posting blocks); rebuild it into a new schema"
                )
            stored = {key: value for key, value in stored.items() if key != _LAYOUT[0]}
            return reconcile_settings(f"PostgreSQL schema {self.schema!r}", stored, requested)
        if not create:
            raise IndexUnavailableError(
                f"PostgreSQL schema {self.schema!r} holds no SAG2 index; build it first "
                "(create=True, or `sag2 index CORPUS --db postgresql://...`)"
            )
        with self._write() as cursor:
            settings = reconcile_settings(
                f"PostgreSQL schema {self.schema!r}", self._stored_meta(), requested
            )
            for statement in pg.CREATE_SCHEMA:
                cursor.execute(self._sql(statement))
            meta = [*settings.as_meta().items(), _LAYOUT]
            cursor.executemany(self._sql(pg.PUT_META), meta)
        return settings

    def _stored_meta(self) -> dict[str, str]:
        """The meta rows of this schema, empty when it does not exist yet."""
        if not self._fetch(pg.SCHEMA_EXISTS, (self.schema,))[0][0]:
            return {}
        return {str(key): str(value) for key, value in self._fetch(self._sql(pg.GET_META))}

    def optimize(self) -> None:
        """Merge the posting segments towards one, dropping deleted units' postings, a bounded
        number of units at a time (`compaction.optimize`)."""
        with self._write() as cursor:
            compaction.optimize(cursor, self.schema)
            cursor.execute(self._sql(pg.ADD_TOTALS), (0, 0))
