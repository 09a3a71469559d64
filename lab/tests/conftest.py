"""The lab's tests run from the repository's root (``import lab``) and share the product tests' helpers
(tests/support.py and the test modules beside it)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "tests", ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
