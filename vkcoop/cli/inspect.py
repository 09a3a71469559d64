"""``vkcoop inspect``: the command line around :func:`vkcoop.inspect.core.inspect_pipeline`.

``--cache DIR`` reads a driver shader cache already on disk instead: no device, no build. ``--cuda KEY`` reads one of
our CUDA kernels (built here by nvcc, no GPU) with the same counters, and ``--beside VULKAN.json`` puts a Vulkan
report's kernels beside it, counter by counter (:mod:`vkcoop.inspect.cuda_twin`).

Exit status: 0 reported (also when the VK_KHR_pipeline_executable_properties query failed or crashed: that is
one line of the report); 2 bad input (before any device work, or refused when the pipeline was built);
3 something needed is missing (zstandard, nvdisasm, an NVIDIA driver, the device's features, or a cache the
reader understands), said in one line; 1 the pipeline process failed.

The table has one row per kernel: registers, shared memory (``?`` where the object does not say: NVuc), scratch
bytes (the NVuc container's SCRATCH; for a cubin its frame size, marked ``f``), and the instruction mix. A second
table has one row per loop that does the math (:func:`vkcoop.inspect.loops.mma_loops`): what one pass over its
body issues, and its instructions per MMA.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import InputError
from ..inspect import core, cuda_twin, targets
from ..inspect.loops import mma_loops
from ..paths import output_file

_WIDTH_COLUMNS = (8, 16, 32, 64, 128)


DESCRIPTION = ("Create a pipeline of ours (a shader variant, a sample's cases, a benchmark GEMM) with the driver's "
               "shader disk cache in a private folder, disassemble what the driver compiled (nvdisasm) and report its "
               "instruction mix, registers and loops; or read a driver shader cache already on disk (--cache).")


def add_command(sub) -> None:
    """``vkcoop inspect`` among the commands."""
    from .commands import command_help
    from .common import add_module_command

    add_module_command(sub, "inspect", sys.modules[__name__], command_help("inspect"), DESCRIPTION)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--shader", help="a shader under shaders/, e.g. gemm/coopmat2_gemm.comp")
    what.add_argument("--sample", help="every pipeline of a sample's cases (vkcoop list)")
    what.add_argument("--gemm", help="the pipelines vkcoop bench sparse builds for a Vulkan path: "
                                     + ", ".join(sorted(targets.GEMM_PATHS)))
    what.add_argument("--attention", metavar="KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG",
                      help="the pipelines of one flash-attention configuration on a case of vkcoop bench attention "
                           "(c: causal, n: decode without GQA, bBATCH: the decode batch; CONFIG: a configuration "
                           "label as bench attention reports it), e.g. prefill/fp16/128/4096c/128:64x64")
    what.add_argument("--cuda", metavar="[mma.sp:]KEY",
                      help="one of our CUDA kernels, read with the same counters (no GPU: nvcc builds it here): a key of "
                           "MmaDenseGemm.CONFIGS (the dense mma.sync kernel, e.g. 128x128k32s3t128g4, the Vulkan "
                           "dense seed's twin) or mma.sp:KEY")
    what.add_argument("--cache", metavar="DIR", help="report a driver shader cache already on disk (a "
                                                     "__GL_SHADER_DISK_CACHE_PATH folder, e.g. copied from a GPU "
                                                     "machine, or an earlier --cache-dir): no device needed")
    parser.add_argument("-D", "--define", action="append", default=[], metavar="NAME=VALUE",
                        help="--shader: one declared @variants combination")
    parser.add_argument("--spec", action="append", default=[], metavar="ID=VALUE",
                        help="--shader: a specialization constant by constant_id or name")
    parser.add_argument("--feature", action="append", default=[], help="--shader: another device feature to enable")
    parser.add_argument("--subgroup-size", type=int, default=None, help="--shader: required subgroup size")
    parser.add_argument("--case", default=None, help="--sample: only this case")
    parser.add_argument("--dtype", default="fp16", help="--gemm, --cuda: fp16 or bf16")
    parser.add_argument("--beside", metavar="VULKAN.json", default=None,
                        help="--cuda: a `vkcoop inspect --gemm ... --json` report to put beside the CUDA kernel, "
                             "counter by counter")
    parser.add_argument("--shape", default="square", help="--gemm: square or llm")
    parser.add_argument("--config", default="0", help="--gemm: an index into the path's tuning list, or a "
                                                       "configuration label (as bench sparse, the tuning cache and "
                                                       "lab/explore.py write them, e.g. 256:128x256x32u8g8)")
    parser.add_argument("--target-workgroups", type=int, default=None,
                        help="--attention: workgroups the automatic key split aims at (default: as bench "
                             "attention, 4 per SM of the device)")
    parser.add_argument("--device", default=None, help="Vulkan device index or name")
    parser.add_argument("--json", dest="json_path", default=None, help="write the report as JSON")
    parser.add_argument("--sass", dest="sass_path", default=None, help="write the full nvdisasm listing")
    parser.add_argument("--cache-dir", default=None, help="keep the driver's cache files here (a new or empty "
                                                            "directory)")
    parser.add_argument("--nvdisasm", default=None, help="path of nvdisasm (default: PATH, CUDA_HOME)")
    parser.add_argument("--raw-arch", default="SM90", help="nvdisasm --binary architecture of NVuc code and raw blobs")
    parser.add_argument("--no-executables", action="store_true",
                        help="skip the VK_KHR_pipeline_executable_properties query")


def target_from_args(args) -> targets.Target:
    if args.shader:
        return targets.shader_target(args.shader, args.define, args.spec, args.feature, args.subgroup_size)
    if args.sample:
        return targets.sample_target(args.sample, args.case)
    if args.attention:
        return attention_target(args.attention, args.target_workgroups)
    return targets.gemm_target(args.gemm, args.dtype, args.shape, args.config)


def attention_target(job: str, target_workgroups: int | None) -> targets.Target:
    """A job (:func:`vkcoop.attention.parse_job`) with one configuration, as an inspect target (the case is the
    benchmark's own)."""
    from dataclasses import asdict

    from ..attention.cases import parse_job
    try:
        case, configs = parse_job(job)
    except ValueError as error:
        raise targets.TargetError(f"--attention: {error}") from None
    if len(configs) != 1:
        raise targets.TargetError(f"--attention {job!r} names {len(configs)} configurations; inspect one at a time")
    return targets.attention_target(case.label, case.dtype, asdict(case.shape), case.causal, configs[0].label(),
                                    target_workgroups)


def _counts(counter, keys) -> str:
    return "/".join(str(counter.get(k, 0)) for k in keys)


def _top(counter, limit: int = 3) -> str:
    return ", ".join(f"{name} x{count}" for name, count in counter.most_common(limit)) or "-"


def print_report(result: core.InspectResult, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 180)
    device = result.device
    robustness = f", buffer robustness {device['buffer_robustness']}" if device.get("buffer_robustness") else ""
    table = Table(title=f"vkcoop inspect: {result.target} on {device.get('name')} (driver "
                        f"{device.get('driver_version')}{robustness}); static instruction counts")
    for column in ("object / kernel", "regs", "scratch", "smem", "instr", "MMA", "LDG 8/16/32/64/128",
                   "STG 16/32/64/128", "LDS/LDSM/STS", "async copy", "BAR", "LDL/STL"):
        table.add_column(column, overflow="fold")
    for obj in result.objects:
        for kernel in obj.kernels:
            mix = kernel.mix
            regs = kernel.registers if kernel.registers is not None else kernel.registers_listing
            table.add_row(f"{obj.kind}@{obj.source}\n{kernel.name or '(raw)'}", _known(regs), _scratch(kernel),
                          _known(kernel.shared_bytes), str(mix.total), _top(mix.mma),
                          _counts(mix.global_loads, _WIDTH_COLUMNS), _counts(mix.global_stores, _WIDTH_COLUMNS[1:]),
                          _counts(mix.shared, ("LDS", "LDSM", "STS")), _top(mix.async_copies, 2),
                          str(sum(mix.barriers.values())), _counts(mix.spills, ("LDL", "STL")))
    console.print(table)
    print_loops(result, console)
    total = result.total_mix
    console.print(f"global load forms: {_top(total.global_load_forms, 4)}", highlight=False)
    console.print(f"shared memory forms: {_top(total.shared_forms, 5)}", highlight=False)
    cache = result.cache
    built = f"; pipelines built: {', '.join(p['label'] for p in result.pipelines)}" if result.pipelines else ""
    console.print(f"[dim]cache: {cache['files']} file(s), {cache['frames']} zstd frame(s), objects {cache['objects']}"
                  f"{built}[/]")
    print_executables(result.executables, console, result.executables_failure)


def print_loops(result: core.InspectResult, console) -> None:
    from rich.table import Table

    rows = [(number, kernel, loop) for number, obj in enumerate(result.objects, 1) for kernel in obj.kernels
            for loop in mma_loops(kernel.loops)]
    if not rows:
        return
    table = Table(title="loops that issue MMAs: one pass over the body (static counts)")
    for column in ("object: kernel", "loop", "instr", "MMA", "instr/MMA", "LDG 8/16/32/64/128", "LDS/LDSM/STS", "BAR",
                   "MUFU", "FP32 ALU", "LDL/STL"):
        table.add_column(column, overflow="fold")
    for number, kernel, loop in rows:
        mix = loop.mix
        table.add_row(f"{number}: {kernel.name or '(raw)'}", f"{loop.start:#x}-{loop.end:#x}",
                      str(mix.total), str(loop.mma), str(loop.instructions_per_mma),
                      _counts(mix.global_loads, _WIDTH_COLUMNS), _counts(mix.shared, ("LDS", "LDSM", "STS")),
                      str(sum(mix.barriers.values())), str(mix.opcodes.get("MUFU", 0)), str(loop.fp32_alu()),
                      _counts(mix.spills, ("LDL", "STL")))
    console.print(table)


def _known(value) -> str:
    return "?" if value is None else str(value)


def _scratch(kernel: core.KernelReport) -> str:
    if kernel.scratch_bytes is not None:
        return str(kernel.scratch_bytes)
    return "?" if kernel.frame_size is None else f"{kernel.frame_size} f"


def print_executables(executables: list, console, failure: dict | None = None) -> None:
    from rich.table import Table
    rows = [(e["pipeline"], x["name"], s["name"], s["value"]) for e in executables if e.get("available")
            for x in e["executables"] for s in x["statistics"]]
    missing = {e.get("reason") for e in executables if not e.get("available")}
    if rows:
        table = Table(title="VK_KHR_pipeline_executable_properties")
        for column in ("pipeline", "executable", "statistic", "value"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(str(v) for v in row))
        console.print(table)
    for reason in sorted(r for r in missing if r):
        console.print(f"[dim]pipeline executable properties: {reason}[/]")
    if failure:
        console.print(f"pipeline executable properties: {failure['message']}", markup=False, highlight=False)


def _write(target: Path, text: str) -> None:
    target.write_text(text)
    print(f"wrote {target}")


def run(args) -> int:
    try:
        result, json_path, sass_path = _inspect(args)
    except (targets.TargetError, InputError, core.InspectInputError) as error:
        print(f"vkcoop: error: {error}", file=sys.stderr)
        return 2
    except core.InspectUnavailable as error:
        print(f"vkcoop: error: unavailable: {error}", file=sys.stderr)
        return 3
    except core.InspectFailed as error:
        print(f"vkcoop: error: failed: {error}", file=sys.stderr)
        return 1
    print_report(result)
    if args.beside:
        try:
            print_side_by_side(args.beside, result)
        except InputError as error:
            print(f"vkcoop: error: {error}", file=sys.stderr)
            return 2
    if json_path:
        _write(json_path, json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    if sass_path:
        _write(sass_path, result.listing())
    return 0


def print_side_by_side(vulkan_path: str, result: core.InspectResult, console=None) -> None:
    """The Vulkan report's kernels and the CUDA kernel, counter by counter (vkcoop.inspect.cuda_twin)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    vulkan = read_beside(vulkan_path)
    titles, rows = cuda_twin.side_by_side(vulkan, result)
    console = console or Console(width=None if sys.stdout.isatty() else 180)
    table = Table(title=f"{escape(vulkan.get('target', vulkan_path))} beside {escape(result.target)} (static counts)")
    for title in ("counter", *titles):
        table.add_column(escape(title), overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(v)) for v in row))
    console.print(table)


def read_beside(vulkan_path: str) -> dict:
    """The Vulkan report ``--beside`` names; InputError for a file that is not one."""
    try:
        vulkan = json.loads(Path(vulkan_path).read_text())
        cuda_twin.vulkan_columns(vulkan)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"--beside {vulkan_path}: not a `vkcoop inspect --json` report ({error})") from None
    return vulkan


def _inspect(args) -> tuple[core.InspectResult, Path | None, Path | None]:
    if args.beside and not args.cuda:
        raise InputError("--beside goes with --cuda: it puts a Vulkan report beside a CUDA kernel")
    if args.cuda:
        # a bad --beside report or output path fails before nvcc and nvdisasm run
        if args.beside:
            read_beside(args.beside)
        json_path, sass_path = output_file(args.json_path), output_file(args.sass_path, "--sass")
        return cuda_twin.inspect_cuda(args.cuda, args.dtype, nvdisasm=args.nvdisasm), json_path, sass_path
    target = None if args.cache else target_from_args(args)
    # bad output paths fail before the pipeline is built, with their folders made
    json_path, sass_path = output_file(args.json_path), output_file(args.sass_path, "--sass")
    if target is None:
        return core.inspect_cache(args.cache, nvdisasm=args.nvdisasm, raw_arch=args.raw_arch), json_path, sass_path
    result = core.inspect_pipeline(target, device=args.device, executables=not args.no_executables,
                                   cache_dir=args.cache_dir, nvdisasm=args.nvdisasm, raw_arch=args.raw_arch)
    return result, json_path, sass_path
