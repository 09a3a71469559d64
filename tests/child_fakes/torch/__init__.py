"""The tests' fake torch in a search process (vkcoop.cuda.isolated): built from VKCOOP_FAKE_TORCH by
tests/fake_torch.py; without that variable this package is not torch at all."""
import os

if "VKCOOP_FAKE_TORCH" not in os.environ:
    raise ImportError("No module named 'torch' (the tests' fake torch is not configured here)")

import fake_torch  # noqa: E402 - on the children's PYTHONPATH (tests/)

fake_torch.build_from_environment()
