"""Helpers shared by the test modules (imported as ``support``; pytest puts tests/ on sys.path)."""
from __future__ import annotations

import pytest


def toolchain_or_skip():
    """spirv_tools, or skip the test when no coopmat2-capable shader toolchain exists."""
    spirv_tools = pytest.importorskip("spirv_tools")
    try:
        spirv_tools.find_toolchain()
    except Exception as error:  # noqa: BLE001 - any failure means no usable toolchain
        pytest.skip(f"no coopmat2-capable shader toolchain: {error}")
    return spirv_tools
