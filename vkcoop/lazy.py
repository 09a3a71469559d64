"""Package names loaded on first use (PEP 562), so that importing a package costs only what its caller touches."""
from __future__ import annotations

import importlib


def homes(table: dict[str, str]) -> dict[str, str]:
    """``{".module": "name name ..."}`` turned into ``{name: ".module"}``."""
    return {name: module for module, names in table.items() for name in names.split()}


def exports(package: str, names: dict[str, str]):
    """The ``__getattr__`` and ``__dir__`` of ``package`` whose public ``names`` map to their modules (relative).
    No name may be one of the package's modules: importing that module would bind it in the name's place."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str):
        home = names.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
