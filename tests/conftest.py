"""Set-up for the whole test session, before pytest-xdist starts its workers."""
import os
import tempfile
from pathlib import Path

# Where PYTHONDONTWRITEBYTECODE is set, every Python the tests start (the workers, `python -m vkcoop` as a process,
# the search and query processes) would compile the package's modules from source again, about half a second each.
# They share compiled modules in a folder outside the checkout instead; Python checks each against its source.
if os.environ.get("PYTHONDONTWRITEBYTECODE"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / f"vkcoop-pycache-{os.getuid()}"))
