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
    chosen = None
    try:
        chosen = spirv_tools.find_toolchain()
    except spirv_tools.ToolchainError:
        pass
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
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
