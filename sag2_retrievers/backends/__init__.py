"""The lexical backends behind one protocol (`base.LexicalBackend`), one folder each.

``sqlite/`` and ``postgres/`` hold the same file names where the roles match: ``index.py``
(the backend class), ``schema.py`` (tables and statements), ``postings.py`` (the statistics
derived at ingest), ``filters.py`` (metadata filters as SQL). ``ingest.py`` (the analysis
pipeline) is shared; FTS5's constants are in the neutral ``sag2_retrievers/bm25.py``.
Importing this package imports no backend, so the PostgreSQL driver stays optional.
"""
