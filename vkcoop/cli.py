"""The ``vkcoop`` command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def _progress(**kwargs) -> Progress:
    return Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True, **kwargs)


def _emit_json(data, target: str | None) -> None:
    text = json.dumps(data, indent=2, default=str)
    if target in (None, "-"):
        print(text)
    else:
        Path(target).write_text(text + "\n")
        err_console.print(f"wrote {target}")


# --- toolchain -----------------------------------------------------------------------------------

def cmd_toolchain(args) -> int:
    import spirv_tools
    from spirv_tools import toolchain

    if args.action == "install":
        try:
            spirv_tools.install_private(Path(args.dest) if args.dest else None,
                                        debs_dir=Path(args.debs) if args.debs else None, force=args.force,
                                        log=lambda msg: err_console.print(msg))
        except spirv_tools.ToolchainError as exc:
            err_console.print(f"[red]error:[/red] {exc}")
            return 1
    survey = toolchain.survey()
    # The search order is the survey order, so the first capable candidate is what find_toolchain() picks.
    chosen = next((c.toolchain for c in survey if c.capable), None)
    backend_info = None
    if chosen is not None:
        be = spirv_tools.backend()
        backend_info = {"compile_backend": be.name, "identity": be.identity}
    if args.json:
        _emit_json({
            "chosen": chosen.describe() if chosen else None,
            "backend": backend_info,
            "private_dir": str(toolchain.default_private_dir()),
            "candidates": [{"toolchain": c.toolchain.describe(), "capable": c.capable, "reason": c.reason,
                            "versions": c.toolchain.versions} for c in survey],
        }, None)
        return 0 if chosen else 1
    table = Table(title="Shader toolchains (search order)")
    for col in ("toolchain", "coopmat2", "versions", "why"):
        table.add_column(col)
    for c in survey:
        versions = ", ".join(f"{k} {v}" for k, v in c.toolchain.versions.items())
        table.add_row(c.toolchain.describe(), "[green]yes[/green]" if c.capable else "[red]no[/red]", versions,
                      "" if c.capable else c.reason)
    console.print(table)
    if chosen:
        console.print(f"using [bold]{chosen.describe()}[/bold]; compiling through {backend_info['compile_backend']}")
        return 0
    console.print(f"[red]no capable toolchain[/red]; run `vkcoop toolchain install` "
                  f"(private prefix: {toolchain.default_private_dir()})")
    return 1


# --- shaders -------------------------------------------------------------------------------------

def cmd_shaders(args) -> int:
    import spirv_tools
    from . import shaders

    variants = shaders.all_variants(args.pattern)
    if not variants:
        err_console.print(f"[red]no shader matches {args.pattern!r}[/red]")
        return 1
    if args.action in ("dis", "reflect"):
        variant = variants[0]
        if len(variants) > 1 and not args.first:
            err_console.print(f"{len(variants)} variants match; showing {variant.label} (narrow the pattern)")
        spirv = shaders.compile_variant(variant)
        if args.action == "dis":
            print(spirv_tools.disassemble(spirv))
        else:
            info = spirv_tools.reflect(spirv).to_dict()
            if args.json:
                _emit_json(info, None)
            else:
                _print_reflection(variant.label, info)
        return 0

    results = []
    with _progress() as progress:
        task = progress.add_task(f"{args.action} shaders", total=len(variants))
        for variant in variants:
            progress.update(task, description=variant.shader)
            if args.action == "build":
                try:
                    shaders.compile_variant(variant)
                    results.append(shaders.CheckResult(variant, True))
                except spirv_tools.ShaderCompileError as exc:
                    results.append(shaders.CheckResult(variant, False, str(exc)))
            else:
                results.append(shaders.check_variant(variant))
            progress.advance(task)
    failed = [r for r in results if not r.ok]
    if args.json:
        _emit_json([{"variant": r.variant.label, "ok": r.ok, "error": r.error, "bytes": r.spirv_bytes}
                    for r in results], None)
    else:
        per_file: dict[str, list] = {}
        for r in results:
            per_file.setdefault(r.variant.shader, []).append(r)
        table = Table(title=f"vkcoop shaders {args.action}")
        for col in ("shader", "variants", "ok", "capabilities (first variant)"):
            table.add_column(col)
        for shader, rs in per_file.items():
            caps = ", ".join(c for c in rs[0].reflection.get("capabilities", [])
                             if c not in ("Shader", "VulkanMemoryModel"))
            ok = sum(r.ok for r in rs)
            table.add_row(shader, str(len(rs)), f"[green]{ok}[/green]" if ok == len(rs) else f"[red]{ok}[/red]", caps)
        console.print(table)
        for r in failed:
            console.print(f"[red]FAILED[/red] {r.variant.label}\n{r.error}")
        console.print(f"{len(results) - len(failed)} of {len(results)} variants "
                      f"{'compiled' if args.action == 'build' else 'compiled and validated'}")
    return 1 if failed else 0


def _print_reflection(label: str, info: dict) -> None:
    table = Table(title=label, show_header=False)
    table.add_column("what")
    table.add_column("value")
    table.add_row("entry point", f"{info['entry_point']} ({info['execution_model']})")
    size = info["local_size"]
    if info.get("local_size_spec_ids"):
        size = f"{size} (spec ids {info['local_size_spec_ids']})"
    table.add_row("local size", str(size))
    table.add_row("capabilities", ", ".join(info["capabilities"]))
    table.add_row("extensions", ", ".join(info["extensions"]))
    table.add_row("spec constants", ", ".join(f"{s['spec_id']}:{s['name']}={s['default']} ({s['type']})"
                                              for s in info["spec_constants"]))
    table.add_row("bindings", ", ".join(f"set {b['set']} binding {b['binding']} {b['name']}" for b in info["bindings"]))
    table.add_row("push constants", ", ".join(info["push_constant_blocks"]) or "-")
    table.add_row("opcodes", ", ".join(o for o in info["opcodes"] if "NV" in o or "Cooperative" in o))
    console.print(table)


# --- info ----------------------------------------------------------------------------------------

def cmd_info(args) -> int:
    from . import vk

    try:
        report = vk.capabilities(args.device, all_devices=args.all, validate=args.validate)
    except vk.VulkanError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        return 1
    if args.json:
        _emit_json(report, None)
        return 0
    for dev in (report if isinstance(report, list) else [report]):
        _print_device(dev)
    return 0


def _yes(flag) -> str:
    return "[green]yes[/green]" if flag else "[red]no[/red]"


def _print_device(dev: dict) -> None:
    head = Table(title=f"[bold]{dev['name']}[/bold]", show_header=False)
    head.add_column("what")
    head.add_column("value")
    for key in ("device_type", "api_version", "driver_name", "driver_info", "driver_version"):
        head.add_row(key.replace("_", " "), str(dev.get(key)))
    limits = dev.get("limits", {})
    head.add_row("shared memory", f"{limits.get('maxComputeSharedMemorySize')} bytes")
    head.add_row("timestamps", f"period {limits.get('timestampPeriod')} ns, {dev.get('timestamp_valid_bits')} valid bits")
    sub = dev.get("subgroup", {})
    head.add_row("subgroup size", f"{sub.get('subgroupSize')} (min {sub.get('minSubgroupSize')}, max {sub.get('maxSubgroupSize')})")
    console.print(head)

    ext = Table(title="cooperative-matrix extensions and features")
    ext.add_column("name")
    ext.add_column("supported")
    for name, ok in dev.get("extensions", {}).items():
        if "cooperative" in name or "bfloat16" in name or "float8" in name:
            ext.add_row(name, _yes(ok))
    cm2 = dev.get("cooperative_matrix2", {})
    for name, ok in cm2.get("features", {}).items():
        ext.add_row(f"  coopmat2 {name}", _yes(ok))
    for name, ok in dev.get("bfloat16", {}).get("features", {}).items():
        ext.add_row(f"  bf16 {name}", _yes(ok))
    console.print(ext)
    if cm2.get("properties"):
        props = Table(title="VkPhysicalDeviceCooperativeMatrix2PropertiesNV", show_header=False)
        props.add_column("property")
        props.add_column("value")
        for name, value in cm2["properties"].items():
            props.add_row(name, str(value))
        console.print(props)
    khr = dev.get("cooperative_matrix_khr", {}).get("properties", [])
    if khr:
        console.print(_shape_table("VkCooperativeMatrixPropertiesKHR", khr))
    flex = cm2.get("flexible_dimensions", [])
    if flex:
        console.print(_shape_table("VkCooperativeMatrixFlexibleDimensionsPropertiesNV", flex))
    if not cm2.get("supported"):
        console.print("[yellow]this device has no VK_NV_cooperative_matrix2: the coopmat2 samples will be skipped[/yellow]")


_SHAPE_COLUMNS = {"MSize": "M", "NSize": "N", "KSize": "K", "MGranularity": "M gran.", "NGranularity": "N gran.",
                  "KGranularity": "K gran.", "AType": "A", "BType": "B", "CType": "C", "ResultType": "result",
                  "saturatingAccumulation": "sat.", "scope": "scope", "workgroupInvocations": "invocations"}


def _shape_table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title)
    columns = list(rows[0].keys())
    for col in columns:
        table.add_column(_SHAPE_COLUMNS.get(col, col), no_wrap=True)
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    return table


# --- samples -------------------------------------------------------------------------------------

def cmd_list(args) -> int:
    from . import samples

    items = samples.all_samples()
    if args.json:
        _emit_json([{"name": s.name, "description": s.description, "requires": s.requires.to_dict()} for s in items],
                   None)
        return 0
    table = Table(title="vkcoop samples")
    for col in ("sample", "what it shows", "needs"):
        table.add_column(col)
    for s in items:
        req = s.requires.to_dict()
        needs = ", ".join(list(req.get("extensions", [])) + list(req.get("features", [])))
        table.add_row(s.name, s.description, needs)
    console.print(table)
    return 0


def cmd_run(args) -> int:
    from . import samples, vk

    if args.all == bool(args.samples):
        err_console.print("[red]error:[/red] name samples to run, or --all")
        return 2
    try:
        chosen = samples.all_samples() if args.all else [samples.get_sample(n) for n in args.samples]
    except KeyError as exc:
        err_console.print(f"[red]error:[/red] {exc.args[0]}")
        return 2
    results = []
    try:
        instance = vk.Instance(validate=args.validate)
    except vk.VulkanError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        return 1
    with instance, _progress() as progress:
        task = progress.add_task("samples", total=len(chosen))
        for sample in chosen:
            progress.update(task, description=sample.name)
            results.append(sample.run(args.device, validate=args.validate, instance=instance))
            progress.advance(task)
    failed = [r for r in results if r.status == "fail"]
    if args.json:
        _emit_json([r.to_dict() for r in results], args.json)
    if not args.json or args.json != "-":
        _print_results(results)
    return 1 if failed else 0


def _print_results(results) -> None:
    table = Table(title="vkcoop run")
    for col in ("sample", "result", "cases", "GPU ms", "wall s", "validation msgs", "note"):
        table.add_column(col)
    colors = {"pass": "green", "fail": "red", "skip": "yellow"}
    for r in results:
        gpu = f"{r.gpu_time_ms:.3f}" if r.gpu_time_ms else "-"
        table.add_row(r.name, f"[{colors[r.status]}]{r.status}[/{colors[r.status]}]", str(r.cases), gpu,
                      f"{r.wall_time_s:.1f}", str(len(r.validation_messages)), r.reason or "")
    console.print(table)
    for r in results:
        for m in r.mismatches[:5]:
            console.print(f"[red]{r.name}[/red] mismatch {m.case} {m.binding}{list(m.index)}: "
                          f"got {m.got!r}, expected {m.expected!r}")
        for issue in r.known_issues:
            state = f"reproduced ({issue['mismatches']} elements differ)" if issue["reproduced"] else "not reproduced"
            console.print(f"[yellow]{r.name}[/yellow] known issue {issue['case']}: {state}: {issue['issue'][:200]}")
        for message in r.validation_messages[:5]:
            console.print(f"[red]{r.name}[/red] validation: {message[:400]}")
    counts = {k: sum(r.status == k for r in results) for k in ("pass", "fail", "skip")}
    cases = sum(r.cases for r in results)
    failed_cases = sum(len(r.failed_cases) for r in results)
    messages = sum(len(r.validation_messages) for r in results)
    console.print(f"summary: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped; "
                  f"{cases} cases dispatched, {failed_cases} failed; {messages} validation messages")


# --- bench, fuzz, demo -----------------------------------------------------------------------------

# bench and fuzz own their options; main() hands them the rest of the command line.
def _delegate_bench(argv) -> int:
    from .bench.__main__ import main as bench_main

    return bench_main(argv, prog="vkcoop bench")


def _delegate_fuzz(argv) -> int:
    from .fuzz.__main__ import main as fuzz_main

    return fuzz_main(argv, prog="vkcoop fuzz")


DELEGATED = {"bench": _delegate_bench, "fuzz": _delegate_fuzz}


def cmd_demo(args) -> int:
    from .demo import main as demo_main

    return demo_main(args)


# --- entry point ---------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vkcoop", description="Vulkan cooperative_matrix2 samples, reference and benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("toolchain", help="show (or install) the coopmat2-capable shader toolchain")
    p.add_argument("action", nargs="?", choices=["show", "install"], default="show")
    p.add_argument("--dest", help="private prefix directory (default: .toolchain/ or $VKCOOP_TOOLCHAIN_DIR)")
    p.add_argument("--debs", help="unpack these already-downloaded .debs instead of fetching")
    p.add_argument("--force", action="store_true", help="reinstall even if a working prefix exists")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_toolchain)

    p = sub.add_parser("shaders", help="build, check (compile + validate), disassemble or reflect shaders")
    p.add_argument("action", choices=["build", "check", "dis", "reflect"])
    p.add_argument("pattern", nargs="?", help="only shaders whose path contains this")
    p.add_argument("--first", action="store_true", help="dis/reflect: take the first matching variant silently")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_shaders)

    p = sub.add_parser("info", help="the Vulkan device(s): coopmat extensions, coopmat2 features and properties")
    p.add_argument("--device", help="index or name (default: $VKCOOP_DEVICE, else the first GPU)")
    p.add_argument("--all", action="store_true", help="every device")
    p.add_argument("--validate", action="store_true", help="enable VK_LAYER_KHRONOS_validation")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("list", help="the samples and what each needs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="dispatch samples and check them against the Python reference")
    p.add_argument("samples", nargs="*")
    p.add_argument("--all", action="store_true")
    p.add_argument("--validate", action="store_true", help="VK_LAYER_KHRONOS_validation; any message fails")
    p.add_argument("--device", help="index or name")
    p.add_argument("--json", nargs="?", const="-", help="write results as JSON (to a file, or - for stdout)")
    p.set_defaults(func=cmd_run)

    sub.add_parser("bench", help="benchmarks (vkcoop bench sparse --help)")
    sub.add_parser("fuzz", help="differential tensor-addressing fuzzer (vkcoop fuzz --help)")

    p = sub.add_parser("demo", help="compile every shader, then dispatch what this machine's Vulkan can run")
    p.add_argument("--device", help="index or name")
    p.add_argument("--validate", action="store_true")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DELEGATED:
        return DELEGATED[argv[0]](argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
