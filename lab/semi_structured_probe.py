"""Where the first ``torch.sparse.to_sparse_semi_structured`` product of a process spends its time: each step timed
twice, and the modules the first one imported (a GPU with torch and cuSPARSELt)."""
from __future__ import annotations

import sys
import time


def main() -> None:
    import torch

    a = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    a = a * (torch.arange(8192, device="cuda") % 4 < 2).to(a.dtype)      # 2:4 along K
    b = torch.randn(8192, 8192, dtype=torch.float16, device="cuda")
    torch.cuda.synchronize()
    for attempt in (1, 2):
        before = set(sys.modules)
        started = time.perf_counter()
        sparse = torch.sparse.to_sparse_semi_structured(a)
        torch.cuda.synchronize()
        made = time.perf_counter()
        torch.mm(sparse, b)
        torch.cuda.synchronize()
        done = time.perf_counter()
        new = sorted(m for m in set(sys.modules) - before if m.count(".") <= 2)
        print(f"attempt {attempt}: to_sparse_semi_structured {made - started:.2f} s, first mm {done - made:.2f} s; "
              f"{len(set(sys.modules) - before)} modules imported: {', '.join(new[:20])}")


if __name__ == "__main__":
    main()
