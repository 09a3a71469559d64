"""``python -m vkcoop``: the ``vkcoop`` command."""
import sys

from .cli import main

sys.exit(main())
