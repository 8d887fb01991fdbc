"""The lexical backends behind one protocol (`base.LexicalBackend`), one folder each.

``sqlite/`` and ``postgres/`` hold the same file names where the roles match: ``index.py``
(the backend class), ``schema.py`` (tables and statements), ``postings.py`` (the statistics
derived at ingest), ``filters.py`` (metadata filters as SQL). ``ingest.py`` (the analysis
pipeline) and ``bm25.py`` (FTS5's constants) are shared. Importing this package imports no
backend, so the PostgreSQL driver stays optional.
"""
