"""``python -m vkcoop.bench sparse ...``: the same options as ``vkcoop bench sparse`` (for hosts where the
console script is not installed)."""
from __future__ import annotations

import argparse
import sys

from .sparse import DTYPES, PATH_NAMES, SHAPES, run_sparse_bench


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def build_parser(prog: str = "python -m vkcoop.bench") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog)
    sub = parser.add_subparsers(dest="bench", required=True)
    sparse = sub.add_parser("sparse", help="2:4 sparse and dense GEMM paths, Vulkan and CUDA, in one run")
    sparse.add_argument("--dtype", type=_list, default=list(DTYPES), help="fp16,bf16")
    sparse.add_argument("--sizes", type=lambda t: [int(v) for v in _list(t)], default=[4096, 8192])
    sparse.add_argument("--shapes", type=_list, default=list(SHAPES), help="square,llm")
    sparse.add_argument("--paths", type=_list, default=None, help=",".join(PATH_NAMES))
    sparse.add_argument("--iters", type=int, default=20)
    sparse.add_argument("--warmup", type=int, default=5)
    sparse.add_argument("--flush-l2", action="store_true")
    sparse.add_argument("--tune", action="store_true", help="try every Vulkan tile configuration, keep the best")
    sparse.add_argument("--llm-tokens", type=int, default=32, help="N of the llm shapes")
    sparse.add_argument("--device", default=None)
    sparse.add_argument("--validate", action="store_true")
    sparse.add_argument("--json", dest="json_path", default=None)
    sparse.add_argument("--plot", dest="plot_path", default=None)
    return parser


def main(argv=None, prog: str = "python -m vkcoop.bench") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        outcome = run_sparse_bench(dtypes=args.dtype, sizes=args.sizes, shapes=args.shapes, iters=args.iters,
                                   warmup=args.warmup, flush_l2=args.flush_l2, paths=args.paths, tune=args.tune,
                                   llm_tokens=args.llm_tokens, device=args.device, validate=args.validate,
                                   json_path=args.json_path, plot_path=args.plot_path)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
