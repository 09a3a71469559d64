"""``python -m vkcoop.fuzz --cases N --seed S [--target hw|portable|both] [--json report.json]``."""
import sys

from . import main

sys.exit(main())
