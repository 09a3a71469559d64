"""Our CUDA kernels read with the counters ``vkcoop inspect`` gives a Vulkan pipeline, and the two side by side.

:func:`inspect_cuda` builds the hand-written kernels' cubin (:func:`vkcoop.cuda.build.compile_kernel`, cached; nvcc
here, no GPU), disassembles it with nvdisasm and reports one kernel the way :mod:`.core` reports the driver's code:
registers and frame from the ELF, the instruction mix, the loops. :func:`counters` reduces one kernel of either
report (its JSON form) to the same rows: registers, local memory, shared memory, LDSM / LDS / STS / LDGSTS, global
loads by width, barriers, and what one pass over the main loop (the MMA loop with the most MMAs) issues per MMA.
:func:`side_by_side` puts a Vulkan pipeline's kernels (a ``vkcoop inspect --gemm ... --json`` file) next to the CUDA
twin: the same instruction (HMMA.16816), the same shared-memory cap and tile.
"""
from __future__ import annotations

from ..cuda import build
from ..cuda.dense import MmaDenseGemm
from ..cuda.gemm import MmaSpGemm
from . import elf, sass
from .core import InspectResult, InspectUnavailable, KernelReport, ObjectReport
from .loops import find_loops, mma_loops
from .targets import TargetError

#: ``--cuda`` names a key of one of these tables: ``KEY`` (the dense mma.sync kernel) or ``mma.sp:KEY``.
FAMILIES = {"mma.sync": ("mma_dense", MmaDenseGemm), "mma.sp": ("mma_sp", MmaSpGemm)}
DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
_WIDTHS = ("8", "16", "32", "64", "128")


def cuda_config(label: str):
    """(source stem, configuration, key) of ``KEY`` or ``mma.sp:KEY``; TargetError naming the choices."""
    family, _, key = label.rpartition(":")
    family = family or "mma.sync"
    if family not in FAMILIES:
        raise TargetError(f"--cuda {label!r}: {family!r} is not one of {', '.join(FAMILIES)}")
    stem, cls = FAMILIES[family]
    if key not in cls.CONFIGS:
        raise TargetError(f"--cuda {label!r}: no {family} configuration {key!r}; choose from {', '.join(cls.CONFIGS)}")
    return stem, cls.CONFIGS[key], key


def inspect_cuda(label: str, dtype: str = "fp16", *, nvdisasm: str | None = None) -> InspectResult:
    """The report of one hand-written kernel: ``label`` as :func:`cuda_config` reads it, for ``dtype`` inputs.
    TargetError for a bad label or dtype; InspectUnavailable without nvcc (or NVRTC) or nvdisasm."""
    if dtype not in DTYPES:
        raise TargetError(f"--dtype {dtype!r}: the CUDA kernels take {', '.join(DTYPES)}")
    stem, config, key = cuda_config(label)
    tool = nvdisasm or sass.find_nvdisasm()
    if tool is None:
        raise InspectUnavailable("nvdisasm", sass.MISSING_NVDISASM)
    try:
        cubin, how = build.compile_kernel(stem)
    except build.KernelBuildError as error:
        raise InspectUnavailable("compiler", str(error).splitlines()[0]) from None
    name = config.kernel_name(DTYPES[dtype])
    text = sass.disassemble(cubin, nvdisasm=tool)
    parsed = elf.parse(cubin)
    info = {k.name: k for k in parsed.kernels}[name]
    listed = next(k for k in sass.parse_listing(text) if k.name == name)
    report = ObjectReport("elf", f"{stem}.cu ({how})", len(cubin), parsed.sm, listing=text)
    report.kernels.append(KernelReport(name, info.registers, listed.registers, info.shared_bytes, info.frame_size,
                                       info.code_bytes, sass.instruction_mix(listed.mnemonics), loops=find_loops(listed)))
    smem = getattr(config, "total_smem_bytes", config.smem_bytes)
    pipeline = {"label": f"{label} {dtype}: {config.threads} threads, {smem} bytes of shared memory", "smem": smem,
                "key": key, "threads": config.threads}
    return InspectResult(f"CUDA {label} {dtype}", {"name": f"{build.ARCH} cubin", "driver_version": how}, [pipeline],
                         [], {"files": 0, "frames": 0, "objects": {"elf": 1}}, [report])


def main_loop(kernel: dict) -> dict | None:
    """The loop that does the math: of the innermost loops that issue MMAs, the one with the most (the first)."""
    loops = [lp for lp in kernel.get("loops") or [] if lp.get("mma")]
    innermost = [lp for lp in loops if not any(o is not lp and int(lp["start"], 16) <= int(o["start"], 16)
                                                and int(o["end"], 16) <= int(lp["end"], 16) for o in loops)]
    return max(innermost, key=lambda lp: lp["mma"], default=None)


def _per(count: int, mma: int) -> str:
    return f"{count} ({count / mma:.3f}/MMA)" if mma else str(count)


def counters(kernel: dict, shared: int | None = None) -> dict:
    """The rows of one kernel (a KernelReport's JSON form); ``shared``: its shared memory where the kernel's own
    record lacks it (a Vulkan pipeline's 'Shared Memory Size' statistic, a CUDA launch's dynamic bytes)."""
    mix = kernel["mix"]
    opcodes, shared_ops = mix.get("opcodes", {}), mix.get("shared", {})
    spills = mix.get("spills", {})
    rows = {"registers": kernel.get("registers") or kernel.get("registers_listing"),
            "local memory (scratch / frame bytes)": kernel.get("scratch_bytes") if kernel.get("scratch_bytes")
            is not None else kernel.get("frame_size"),
            "spill LDL / STL": f"{spills.get('LDL', 0)} / {spills.get('STL', 0)}",
            "shared memory (bytes)": shared if shared is not None else kernel.get("shared_bytes"),
            "instructions": mix.get("total"),
            "MMA": ", ".join(f"{k} x{v}" for k, v in mix.get("mma", {}).items()) or "-",
            "LDG 8/16/32/64/128": "/".join(str(mix.get("global_loads", {}).get(w, 0)) for w in _WIDTHS),
            "LDGSTS (cp.async)": sum(v for k, v in mix.get("async_copies", {}).items() if k.startswith("LDGSTS")),
            "LDS / LDSM / STS": "/".join(str(shared_ops.get(op, 0)) for op in ("LDS", "LDSM", "STS")),
            "barriers (BAR)": opcodes.get("BAR", 0)}
    loop = main_loop(kernel)
    if loop is None:
        return {**rows, "main loop": "-"}
    body, mma = loop["mix"], loop["mma"]
    body_shared, body_ops = body.get("shared", {}), body.get("opcodes", {})
    global_loads = sum(body.get("global_loads", {}).values())
    copies = sum(v for k, v in body.get("async_copies", {}).items() if k.startswith("LDGSTS"))
    rows.update({"main loop: instructions / MMA": f"{loop['instructions']} / {mma} = {loop['instructions_per_mma']}",
                 "main loop: LDSM": _per(body_shared.get("LDSM", 0), mma),
                 "main loop: LDS / STS": f"{body_shared.get('LDS', 0)} / {_per(body_shared.get('STS', 0), mma)}",
                 "main loop: LDG": _per(global_loads, mma), "main loop: LDGSTS": _per(copies, mma),
                 "main loop: BAR": _per(body_ops.get("BAR", 0), mma)})
    return rows


def pipeline_shared_memory(report: dict) -> list[int]:
    """The 'Shared Memory Size' statistic of each pipeline executable the Vulkan report queried, in order."""
    return [s["value"] for e in report.get("executables") or [] if e.get("available")
            for x in e.get("executables", []) for s in x.get("statistics", []) if s.get("name") == "Shared Memory Size"]


def vulkan_columns(vulkan: dict) -> list[tuple[str, dict]]:
    """(column title, counters) of every kernel of a Vulkan inspect report; ValueError (or the error of the part
    that does not read) for a file that is not one."""
    kernels = [k for obj in vulkan.get("objects", []) for k in obj.get("kernels", [])]
    if not kernels:
        raise ValueError("it holds no kernel")
    shared = pipeline_shared_memory(vulkan)
    return [(f"Vulkan {i + 1}: {k.get('name') or '(raw)'}", counters(k, shared[i] if i < len(shared) else None))
            for i, k in enumerate(kernels)]


def side_by_side(vulkan: dict, cuda: InspectResult) -> tuple[list[str], list[tuple]]:
    """(column titles, rows of (counter, value per column)): every kernel of a Vulkan inspect report, then the CUDA
    kernel, with the same counters."""
    columns = vulkan_columns(vulkan)
    twin = cuda.objects[0].kernels[0]
    columns.append((f"CUDA: {twin.name}", counters(twin.to_dict(), cuda.pipelines[0]["smem"])))
    names = list(dict.fromkeys(name for _, rows in columns for name in rows))
    return [title for title, _ in columns], [(name, *(rows.get(name, "-") for _, rows in columns)) for name in names]
