"""Set-up for the whole test session, before pytest-xdist starts its workers."""
import os

import pytest

_SET_HERE = {}


@pytest.hookimpl(trylast=True)   # after pytest's own temporary-folder set-up
def pytest_configure(config):
    """Where PYTHONDONTWRITEBYTECODE is set, every Python the tests start (the pytest-xdist workers, `python -m
    vkcoop`, the search and query processes) would compile the package's modules from source again, and each worker
    would rewrite every test module's asserts again, run after run. They share compiled modules in pytest's own
    temporary root instead (private to the user: pytest checks its owner and mode), never beside the sources;
    Python checks each one against its source. Under --basetemp they share the run's folder only."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or "PYTHONPYCACHEPREFIX" in os.environ:
        return
    _SET_HERE.update(PYTHONDONTWRITEBYTECODE=os.environ.pop("PYTHONDONTWRITEBYTECODE"))
    base = config._tmp_path_factory.getbasetemp()
    os.environ["PYTHONPYCACHEPREFIX"] = str((base if config.option.basetemp else base.parent) / "bytecode")


def pytest_sessionstart(session):
    """The compiled CUDA kernels are kept in the user's vkcoop cache (support.kernel_cache_folder): a run compiles
    only the sources that changed since the last run of any checkout on this machine."""
    import support
    support.KERNEL_CACHE = support.kernel_cache_folder(session.config)


def pytest_unconfigure(config):
    """A caller of pytest.main() gets its environment back."""
    if _SET_HERE:
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        os.environ.update(_SET_HERE)
        _SET_HERE.clear()
