"""torch's warnings about what the CUDA paths do on purpose are silenced once torch is imported through
vkcoop.cuda.gemm._torch, and no other warning is."""
from __future__ import annotations

import sys
import types
import warnings

import pytest

from vkcoop.cuda import gemm


@pytest.mark.parametrize("message", gemm.QUIET_TORCH_WARNINGS)
def test_only_the_known_torch_warnings_are_silenced(monkeypatch, message):
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or types.ModuleType("torch"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemm._torch()
        gemm._torch()   # a second import adds no second filter
        warnings.warn(f"{message}. The rest of torch's sentence.", UserWarning)
        warnings.warn("The given NumPy array has an unrelated problem", UserWarning)
        warnings.warn(message, DeprecationWarning)
        ours = [f for f in warnings.filters if f[1] is not None and f[1].pattern == message]
    assert [str(w.message) for w in caught] == ["The given NumPy array has an unrelated problem", message]
    assert len(ours) == 1
