"""``python -m spirv_tools lock PREFIX``: write the toolchain lock file from a checked prefix."""
import sys

from .lock import main

if len(sys.argv) < 2 or sys.argv[1] != "lock":
    sys.exit("usage: python -m spirv_tools lock PREFIX [--output FILE] [--suite S] [--checked TEXT]")
sys.exit(main(sys.argv[2:]))
