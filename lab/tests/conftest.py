"""The lab's tests share the suite's helpers (tests/support.py)."""
import sys
from pathlib import Path

_SUITE = str(Path(__file__).resolve().parents[2] / "tests")
if _SUITE not in sys.path:
    sys.path.insert(0, _SUITE)
