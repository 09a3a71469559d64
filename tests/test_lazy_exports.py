"""The packages whose names load on first use (vkcoop.lazy, spirv_tools): every public name resolves, none is one
of the package's own modules (importing that module would bind it in the name's place), and a CUDA search child,
which needs only the errors and the GEMM types, loads neither the shader compiler nor the Vulkan GEMM kernels."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from vkcoop.lazy import exports, homes

ROOT = Path(__file__).resolve().parent.parent
LAZY = ("spirv_tools", "vkcoop.gemm")
UNNEEDED = ("spirv_tools.compiler", "spirv_tools.install", "vkcoop.gemm.vulkan", "vkcoop.gemm.staging")


def _shadowed(package) -> set[str]:
    """The lazily loaded names of ``package`` that are also the names of its modules."""
    return {info.name for info in pkgutil.iter_modules(package.__path__)} & set(package._HOMES)


@pytest.mark.parametrize("name", LAZY)
def test_every_public_name_resolves_and_none_is_a_module(name):
    package = importlib.import_module(name)
    assert set(package._HOMES) <= set(package.__all__) <= set(dir(package))
    assert all(getattr(package, public) is not None for public in package.__all__)
    assert _shadowed(package) == set()
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        package.no_such_name


def test_the_shadow_check_sees_a_name_that_is_a_module(tmp_path, monkeypatch):
    """The planted fault: a package exporting `helper` from its module `helper`."""
    (tmp_path / "planted").mkdir()
    (tmp_path / "planted" / "helper.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "planted" / "__init__.py").write_text(
        "from vkcoop.lazy import exports, homes\n_HOMES = homes({'.helper': 'helper'})\n"
        "__getattr__, __dir__ = exports(__name__, _HOMES)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    package = importlib.import_module("planted")
    assert package.helper() == 1 and _shadowed(package) == {"helper"}


def test_homes_and_exports_map_names_to_their_modules():
    assert homes({".a": "x y", ".b": "z"}) == {"x": ".a", "y": ".a", "z": ".b"}
    module = types.ModuleType("vkcoop.planted_json")
    sys.modules[module.__name__] = module
    try:
        getter, lister = exports(module.__name__, {"dumps": "json"})
        assert getter("dumps") is json.dumps and "dumps" in lister()
    finally:
        del sys.modules[module.__name__]


CHILD = f"""
import importlib, json, sys
if sys.argv[1]:
    importlib.import_module(sys.argv[1])
import vkcoop.cuda.search_child
print(json.dumps([m for m in {UNNEEDED!r} if m in sys.modules]))
"""


def _loaded_by_the_search_child(first: str = "") -> list[str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, first], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_cuda_search_child_loads_neither_the_compiler_nor_the_vulkan_gemm():
    assert _loaded_by_the_search_child() == []


def test_the_child_check_sees_a_module_loaded_before_it():
    """The planted fault: the Vulkan GEMM imported first must show in what the check reads."""
    assert "vkcoop.gemm.vulkan" in _loaded_by_the_search_child("vkcoop.gemm.vulkan")
