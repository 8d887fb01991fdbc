"""``python -m sag2_retrievers.cli``: the ``sag2`` command."""

import sys

from .app import main

sys.exit(main())
