"""``python -m vkcoop.fuzz --cases N --seed S [--target hw|portable|both] [--json report.json]``.

``main(argv=None, prog="vkcoop fuzz") -> int`` is what ``vkcoop fuzz`` (vkcoop.cli) calls."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m vkcoop.fuzz"))
