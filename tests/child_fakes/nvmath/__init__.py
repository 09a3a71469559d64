"""The tests' fake nvmath-python in a search process: built from VKCOOP_FAKE_NVMATH by tests/fake_nvmath.py;
without that variable nvmath is not installed."""
import os

if "VKCOOP_FAKE_NVMATH" not in os.environ:
    raise ImportError("No module named 'nvmath' (the tests' fake nvmath is not configured here)")

import fake_nvmath  # noqa: E402 - on the children's PYTHONPATH (tests/)

fake_nvmath.build_from_environment()
