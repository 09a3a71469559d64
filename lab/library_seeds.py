"""Write ``vkcoop/bench/library_seeds.json``, the library searches' shipped winners, from the deep runs of the
committed result sets (``docs/results/*/bench-default-deep.json``): ``python -m lab.library_seeds`` from the
repository's root. ``--check`` writes nothing and exits 1 where the shipped file differs from what the runs say."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vkcoop.bench import library_seeds

REPO = Path(__file__).resolve().parent.parent


def deep_runs(root: Path = REPO) -> list[Path]:
    """The committed result sets' deep runs, in the order their folders sort."""
    return sorted((root / "docs" / "results").glob(f"*/{library_seeds.DEEP_RUN}"))


def main(argv=None, target: Path | None = None) -> int:
    """``target``: the file to write or check (default the shipped one)."""
    parser = argparse.ArgumentParser(prog="python -m lab.library_seeds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 where they differ")
    args = parser.parse_args(argv)
    target = Path(target or library_seeds.SHIPPED_FILE)
    runs = deep_runs()
    text = library_seeds.render(library_seeds.generate(runs, root=REPO))
    if args.check:
        same = target.is_file() and target.read_text() == text
        print(f"{target}: {'as the runs say' if same else 'differs from the runs; regenerate it'}")
        return 0 if same else 1
    target.write_text(text)
    print(f"{target}: written from {len(runs)} deep run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
