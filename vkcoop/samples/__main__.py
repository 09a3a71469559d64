"""Run samples and print a summary: ``python -m vkcoop.samples [NAME ...] [--validate] [--json FILE] [--device D]``.

Exit status: 0 when nothing failed (skips are reported with their reason, never as passes), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from . import all_samples, get_sample


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkcoop.samples", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="samples to run (default: all)")
    parser.add_argument("--validate", action="store_true", help="enable VK_LAYER_KHRONOS_validation; any message "
                                                                  "fails the case")
    parser.add_argument("--device", default=None, help="device index or name substring (default $VKCOOP_DEVICE)")
    parser.add_argument("--json", metavar="FILE", help="also write every result as JSON to FILE ('-' for stdout)")
    parser.add_argument("--list", action="store_true", help="list the samples and their requirements")
    args = parser.parse_args(argv)

    samples = [get_sample(n) for n in args.names] if args.names else all_samples()
    if args.list:
        for s in samples:
            req = s.requires
            print(f"{s.name:22} {s.description}\n{'':22} needs: {', '.join(req.extensions + req.features)}")
        return 0
    device = int(args.device) if args.device and args.device.isdigit() else args.device
    results = []
    started = time.perf_counter()
    for sample in samples:
        result = sample.run(device, validate=args.validate)
        results.append(result)
        print(f"{result.status.upper():5} {sample.name:22} cases={result.cases:4d} gpu={result.gpu_time_ms:9.3f} ms "
              f"wall={result.wall_time_s:6.1f} s  {result.reason}", flush=True)
        for m in result.mismatches:
            print(f"      mismatch {m.case} {m.binding}{list(m.index)}: got {m.got!r}, expected {m.expected!r}")
        for issue in result.known_issues:
            state = f"reproduced ({issue['mismatches']} elements differ)" if issue["reproduced"] else "not reproduced"
            print(f"      known issue {issue['case']}: {state}: {issue['issue'][:160]}")
        for message in result.validation_messages[:5]:
            print(f"      validation: {message[:400]}")
    counts = {status: sum(r.status == status for r in results) for status in ("pass", "fail", "skip")}
    cases = sum(r.cases for r in results)
    failed_cases = sum(len(r.failed_cases) for r in results)
    messages = sum(len(r.validation_messages) for r in results)
    print(f"summary: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped; "
          f"{cases} cases dispatched, {failed_cases} failed; {messages} validation messages; "
          f"{time.perf_counter() - started:.1f} s" + (" (validation on)" if args.validate else ""))
    if args.json:
        text = json.dumps([r.to_dict() for r in results], indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
