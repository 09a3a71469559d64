"""``python -m vkcoop.cli``: the ``vkcoop`` command where the console script is not installed."""
import sys

from . import main

sys.exit(main())
