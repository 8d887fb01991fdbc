"""The SAG2 engine: rounds (`rounds.py`) over a retrieval's bookkeeping (`state.py`), its
result (`output.py`) and the blocking API's event loop (`loop.py`)."""

from .rounds import RoundCallback, SAG2Engine

__all__ = ["RoundCallback", "SAG2Engine"]
