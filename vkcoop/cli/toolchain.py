"""``vkcoop toolchain`` and ``vkcoop shaders``: the shader toolchain, and compiling, checking and reading shaders."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table

from .commands import command_help
from .common import CliError, Exit, console, emit_json, err_console


# --- toolchain ------------------------------------------------------------------------------------------------
def accept_by_shader_check(toolchain, features: dict):
    """What an install must pass before its prefix is accepted: every shader variant compiles and validates
    with the candidate (bf16 variants skipped by name where it cannot compile them)."""
    import spirv_tools
    from .. import shaders

    return spirv_tools.check_shaders(shaders.all_variants(), shaders.check_variant, features)


def toolchain_report() -> dict:
    """The toolchain search as data: every candidate in search order, the chosen one and its compile backend."""
    import spirv_tools
    from spirv_tools import toolchain

    survey = toolchain.survey()
    # The search order is the survey order, so the first capable candidate is what find_toolchain() picks.
    chosen = next((c.toolchain for c in survey if c.capable), None)
    backend = None
    if chosen is not None:
        be = spirv_tools.backend()
        backend = {"compile_backend": be.name, "identity": be.identity}
    return {"chosen": chosen.describe() if chosen else None, "backend": backend,
            "private_dir": str(toolchain.default_private_dir()), "manifest": spirv_tools.manifest(),
            "candidates": [{"toolchain": c.toolchain.describe(), "capable": c.capable, "reason": c.reason,
                            "versions": c.toolchain.versions} for c in survey]}


def versions_text(versions: dict) -> str:
    """Each tool's own ``--version``; the glslang built into glslc after them, as the secondary fact it is."""
    from spirv_tools.toolchain import GLSLC_GLSLANG

    order = ["glslang", "shaderc", "spirv-tools"]
    names = [n for n in order if n in versions] + [n for n in versions if n not in order and n != GLSLC_GLSLANG]
    text = ", ".join(f"{name} {versions[name]}" for name in names)
    built_in = versions.get(GLSLC_GLSLANG)
    return text + (f" (glslc built with glslang {built_in})" if built_in else "")


def print_toolchain(report: dict) -> None:
    table = Table(title="Shader toolchains (search order)")
    for col in ("toolchain", "coopmat2", "versions", "why"):
        table.add_column(col)
    for c in report["candidates"]:
        versions = versions_text(c["versions"])
        table.add_row(c["toolchain"], "[green]yes[/green]" if c["capable"] else "[red]no[/red]", versions,
                      "" if c["capable"] else c["reason"])
    console.print(table)
    if report["chosen"]:
        console.print(f"using [bold]{report['chosen']}[/bold]; compiling through "
                      f"{report['backend']['compile_backend']}")


def cmd_toolchain(args) -> int:
    import spirv_tools

    if args.action == "install":
        dest = Path(args.dest).resolve() if args.dest else None
        spirv_tools.install_private(dest, debs_dir=Path(args.debs) if args.debs else None, force=args.force,
                                    accept=accept_by_shader_check, log=lambda msg: err_console.print(msg))
    report = toolchain_report()
    if args.json:
        emit_json(report, None)
    else:
        print_toolchain(report)
    if not report["chosen"]:
        raise CliError("no coopmat2-capable shader toolchain", "run `vkcoop toolchain install`", Exit.ENVIRONMENT)
    return Exit.OK


def add_toolchain_parser(sub) -> None:
    p = sub.add_parser("toolchain", help=command_help("toolchain"))
    p.add_argument("action", nargs="?", choices=["show", "install"], default="show",
                   help="show the search (default) or install the private prefix")
    p.add_argument("--dest", help="install: private prefix directory (default: .toolchain/ or "
                                  "$VKCOOP_TOOLCHAIN_DIR)")
    p.add_argument("--debs", help="install: unpack these already-downloaded .debs instead of fetching")
    p.add_argument("--force", action="store_true", help="install: reinstall even if a working prefix exists")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_toolchain)


# --- shaders --------------------------------------------------------------------------------------------------
def select_variants(pattern: str | None, defines: list | None = None):
    """Declared variants whose shader path contains ``pattern`` and whose defines include every NAME=VALUE."""
    from .. import shaders

    variants = shaders.all_variants(pattern)
    if not variants:
        raise CliError(f"no shader matches {pattern!r}", "`vkcoop shaders list` shows them", Exit.FAILED)
    for item in defines or []:
        name, _, value = item.partition("=")
        if not value:
            raise CliError(f"-D {item!r} is not NAME=VALUE", "e.g. -D GEMM_TYPES=F16_F32")
        variants = [v for v in variants if (name, value) in v.defines]
    if not variants:
        raise CliError(f"no variant of {pattern!r} has {' '.join(defines)}", "`vkcoop shaders list PATTERN` "
                       "shows the variants")
    return variants


def _check_one(action: str, variant, reflect: bool):
    import spirv_tools
    from .. import shaders

    if action != "build":
        return shaders.check_variant(variant, reflect)
    try:
        shaders.compile_variant(variant)
        return shaders.CheckResult(variant, True)
    except spirv_tools.ShaderCompileError as exc:
        return shaders.CheckResult(variant, False, str(exc))


def check_shaders(action: str, variants, reflect: bool = True) -> list:
    """Compile (``build``) or compile and validate (``check``, and reflect unless ``reflect`` is False) each
    variant, on a thread per core (shaderc and spirv-val run outside the GIL); a compile error is a result.
    Results come back in the variants' order."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from ..progress import HEARTBEAT_SECONDS, RunProgress

    variants, results, failed = list(variants), [], 0
    with RunProgress(len(variants), "auto", console=err_console, title=f"{action} shaders", transient=True,
                     line_every_s=HEARTBEAT_SECONDS) as shown, \
            ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = [pool.submit(_check_one, action, variant, reflect) for variant in variants]
        for variant, future in zip(variants, futures):
            shown.step(f"{action} {variant.shader}")
            results.append(future.result())
            failed += not results[-1].ok
            shown.finished(f"{action} shaders: {variant.shader}" + (f", {failed} failed" if failed else ""))
    return results


def _print_checks(action: str, results: list) -> None:
    per_file: dict[str, list] = {}
    for r in results:
        per_file.setdefault(r.variant.shader, []).append(r)
    table = Table(title=f"vkcoop shaders {action}")
    for col in ("shader", "variants", "ok", "capabilities (first variant)"):
        table.add_column(col)
    for shader, rs in per_file.items():
        caps = ", ".join(c for c in rs[0].reflection.get("capabilities", []) if c not in ("Shader", "VulkanMemoryModel"))
        ok = sum(r.ok for r in rs)
        table.add_row(shader, str(len(rs)), f"[green]{ok}[/green]" if ok == len(rs) else f"[red]{ok}[/red]", caps)
    console.print(table)
    failed = [r for r in results if not r.ok]
    for r in failed:
        console.print(f"[red]FAILED[/red] {r.variant.label}\n{r.error}")
    console.print(f"{len(results) - len(failed)} of {len(results)} variants "
                  f"{'compiled' if action == 'build' else 'compiled and validated'}")


def _one_variant(args):
    variants = select_variants(args.pattern, args.define)
    if len(variants) > 1 and not args.first:
        shown = ", ".join(v.label for v in variants[:5])
        raise CliError(f"{len(variants)} variants match ({shown}{', ...' if len(variants) > 5 else ''})",
                       "narrow it with -D NAME=VALUE, or take the first with --first")
    return variants[0]


def cmd_shaders(args) -> int:
    import spirv_tools
    from .. import shaders

    if args.action == "list":
        variants = select_variants(args.pattern, args.define)
        if args.json:
            emit_json([{"shader": v.shader, "defines": dict(v.defines), "label": v.label} for v in variants], None)
        else:
            for v in variants:
                print(v.label)
        return Exit.OK
    if args.action in ("dis", "reflect"):
        variant = _one_variant(args)
        spirv = shaders.compile_variant(variant)
        if args.action == "dis":
            print(spirv_tools.disassemble(spirv))
        elif args.json:
            emit_json(spirv_tools.reflect(spirv).to_dict(), None)
        else:
            print_reflection(variant.label, spirv_tools.reflect(spirv).to_dict())
        return Exit.OK
    results = check_shaders(args.action, select_variants(args.pattern, args.define))
    if args.json:
        emit_json([{"variant": r.variant.label, "ok": r.ok, "error": r.error, "bytes": r.spirv_bytes}
                   for r in results], None)
    else:
        _print_checks(args.action, results)
    return Exit.FAILED if any(not r.ok for r in results) else Exit.OK


def print_reflection(label: str, info: dict) -> None:
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


def add_shaders_parser(sub) -> None:
    p = sub.add_parser("shaders", help=command_help("shaders"))
    p.add_argument("action", choices=["list", "build", "check", "dis", "reflect"],
                   help="list variants; build: compile; check: compile + spirv-val; dis/reflect: one variant")
    p.add_argument("pattern", nargs="?", help="only shaders whose path contains this (default: all)")
    p.add_argument("-D", "--define", action="append", metavar="NAME=VALUE",
                   help="only variants with this define (repeatable); picks the variant for dis/reflect")
    p.add_argument("--first", action="store_true", help="dis/reflect: take the first matching variant")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_shaders, needs_toolchain=lambda args: args.action != "list")
