"""``vkcoop info``, ``vkcoop list`` and ``vkcoop run``: the device, the samples, and running them."""
from __future__ import annotations

from rich.table import Table

from .commands import command_help
from .common import (CliError, Exit, add_device_argument, add_progress_arguments, add_validate_argument,
                     check_device, chosen_progress, console, emit_json, err_console, nothing_ran, nothing_ran_error,
                     output_path)


# --- info -----------------------------------------------------------------------------------------------------
def device_reports(device=None, all_devices: bool = False, validate: bool = False) -> list[dict]:
    """One capability report per device asked for (vkcoop.vk.capabilities)."""
    from .. import vk

    report = vk.capabilities(device, all_devices=all_devices, validate=validate)
    return report["devices"] if all_devices else [report]


def _yes(flag) -> str:
    return "[green]yes[/green]" if flag else "[red]no[/red]"


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


def _head_table(dev: dict) -> Table:
    head = Table(title=f"[bold]{dev['name']}[/bold]", show_header=False)
    head.add_column("what")
    head.add_column("value")
    for key in ("device_type", "api_version", "driver_name", "driver_info", "driver_version"):
        head.add_row(key.replace("_", " "), str(dev.get(key)))
    limits = dev.get("limits", {})
    head.add_row("shared memory", f"{limits.get('maxComputeSharedMemorySize')} bytes")
    head.add_row("timestamps", f"period {limits.get('timestampPeriod')} ns, {dev.get('timestamp_valid_bits')} valid bits")
    sub = dev.get("subgroup", {})
    head.add_row("subgroup size", f"{sub.get('subgroupSize')} (min {sub.get('minSubgroupSize')}, "
                                  f"max {sub.get('maxSubgroupSize')})")
    return head


def print_device(dev: dict) -> None:
    console.print(_head_table(dev))
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
        console.print("[yellow]this device has no VK_NV_cooperative_matrix2: the coopmat2 samples will be "
                      "skipped[/yellow]")


def cmd_info(args) -> int:
    check_device(args.device)
    reports = device_reports(args.device, args.all, args.validate)
    if args.json:
        emit_json(reports if args.all else reports[0], None)
        return Exit.OK
    for dev in reports:
        print_device(dev)
    return Exit.OK


# --- list and run ---------------------------------------------------------------------------------------------
def choose_samples(names: list, run_all: bool) -> list:
    from .. import samples

    if run_all == bool(names):
        raise CliError("name samples to run, or --all", "`vkcoop list` shows them")
    try:
        return samples.all_samples() if run_all else [samples.get_sample(n) for n in names]
    except KeyError as exc:
        raise CliError(exc.args[0], "`vkcoop list` shows them") from None


def run_samples(chosen: list, device=None, validate: bool = False, on_result=None, progress: str = "auto") -> list:
    """Run each sample (a skip result where the device lacks what it needs) and return the SampleResults.
    ``on_result(result)`` is called after each; Ctrl-C stops after the sample in flight is abandoned. ``progress``:
    a mode of :data:`vkcoop.progress.PROGRESS_MODES` (piped: a line per sample, a heartbeat while one compiles)."""
    from .. import vk
    from ..progress import RunProgress

    results = []
    with vk.Instance(validate=validate) as instance, \
            RunProgress(len(chosen), progress, console=err_console, title="samples", transient=True) as shown:
        for sample in chosen:
            shown.step(sample.name)
            result = sample.run(device, validate=validate, instance=instance)
            results.append(result)
            if on_result:
                on_result(result)
            shown.finished(f"{sample.name}: skip ({result.reason[:120]})" if result.status == "skip" else
                           f"{sample.name}: {result.status}, {result.cases} cases, {result.wall_time_s:.1f} s")
    return results


def cmd_list(args) -> int:
    from .. import samples

    items = samples.all_samples()
    if args.json:
        emit_json([{"name": s.name, "description": s.description, "requires": s.requires.to_dict()}
                   for s in items], None)
        return Exit.OK
    table = Table(title="vkcoop samples")
    for col in ("sample", "what it shows", "needs"):
        table.add_column(col)
    for s in items:
        req = s.requires.to_dict()
        table.add_row(s.name, s.description, ", ".join(list(req.get("extensions", [])) + list(req.get("features", []))))
    console.print(table)
    return Exit.OK


def print_results(results) -> None:
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
        for note in r.not_instrumented[:5]:
            console.print(f"[yellow]{r.name}[/yellow] GPU-AV did not instrument: {note[:400]}")
    counts = {k: sum(r.status == k for r in results) for k in ("pass", "fail", "skip")}
    gaps = sum(len(r.not_instrumented) for r in results)
    console.print(f"summary: {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped; "
                  f"{sum(r.cases for r in results)} cases dispatched, "
                  f"{sum(len(r.failed_cases) for r in results)} failed; "
                  f"{sum(len(r.validation_messages) for r in results)} validation messages"
                  + (f"; {gaps} GPU-AV notes of what it could not instrument" if gaps else ""))


def cmd_run(args) -> int:
    chosen = choose_samples(args.samples, args.all)
    output_path(args.json)            # a bad --json path fails now, not after the run
    check_device(args.device)
    results = []
    try:
        run_samples(chosen, args.device, args.validate, on_result=results.append, progress=chosen_progress(args))
    except KeyboardInterrupt:
        if results:
            print_results(results)
        raise
    if args.json:
        emit_json([r.to_dict() for r in results], args.json)
    if args.json != "-":
        print_results(results)
    return run_exit_code(results)


def run_exit_code(results) -> Exit:
    """1 when a sample failed; 3 (one line) when every sample was skipped, so nothing was checked; else 0."""
    if any(r.status == "fail" for r in results):
        return Exit.FAILED
    if nothing_ran(r.status for r in results):
        raise nothing_ran_error("sample", [r.reason for r in results],
                                "the samples need VK_NV_cooperative_matrix2: `vkcoop info` shows what this device "
                                "has, `vkcoop demo` runs what it can")
    return Exit.OK


def add_device_parsers(sub) -> None:
    p = sub.add_parser("info", help=command_help("info"))
    add_device_argument(p)
    p.add_argument("--all", action="store_true", help="every device")
    add_validate_argument(p, "query the device")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("list", help=command_help("list"))
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help=command_help("run"),
                       description="Dispatch samples and check them against the Python reference. A sample this "
                                   "device cannot run is skipped with the reason; when every one is, nothing was "
                                   "checked and the exit code is 3.")
    p.add_argument("samples", nargs="*", help="sample names (`vkcoop list`)")
    p.add_argument("--all", action="store_true", help="every sample")
    add_validate_argument(p, "run the samples (any message fails)")
    add_device_argument(p)
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write results as JSON to FILE (folders are created), or - for stdout")
    add_progress_arguments(p, "a line per finished sample")
    p.set_defaults(func=cmd_run, needs_toolchain=True)
