"""``python -m vkcoop.inspect ...``: the same options as ``vkcoop inspect``."""
import sys

from .app import main

sys.exit(main())
