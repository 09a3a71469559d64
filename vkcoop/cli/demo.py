"""``vkcoop demo``: the README's first command.

1. compiles and validates every shader variant with the coopmat2 toolchain (a second run finds them in the SPIR-V
   cache and among the remembered spirv-val passes, and runs neither tool again);
2. dispatches the portable tensor-addressing port (:mod:`vkcoop.portable`) on whatever Vulkan device exists
   (lavapipe will do): a showcase of hand-picked cases and random fuzz cases, each element checked against
   :mod:`vkcoop.tensor`;
3. on a device with VK_NV_cooperative_matrix2, runs the whole sample suite against the reference.

Nothing is reported as passed that was not dispatched; what this machine can't run is named with the reason.

The demo is the README's first command on any machine, a GPU-less one and CI included, so its exit code judges what
ran: 0 when every step that could run here passed and step 2 dispatched (step 3 skipped, with its reason, on a device
without coopmat2 is what such a machine can show, not a failure); 1 when a step failed; 3 when there is no Vulkan
device, so nothing could be dispatched (as ``run``, ``bench`` and ``fuzz`` exit 3 when nothing of theirs could run).
"""
from __future__ import annotations

import time

import numpy as np
from rich.rule import Rule

from ..portable import AddressingCase, AddressingResult, PortableRunner, reference_arrays
from ..tensor import ClampMode, TensorLayout, TensorView
from .commands import command_help
from .common import Exit, add_device_argument, add_validate_argument, check_device, console, nothing_ran_error
from .device import choose_samples, device_reports, print_results, run_samples
from .toolchain import check_shaders, print_toolchain, select_variants, toolchain_report

def _showcase() -> list[tuple[str, AddressingCase]]:
    """Hand-picked cases that exercise each part of the addressing (names say what)."""
    L = TensorLayout.create
    V = TensorView.create
    shows = [
        ("row-major 2-D slice", AddressingCase(L(2, ClampMode.Constant).set_dimension(40, 30).slice((3, 5), (16, 16)),
                                               16, 16)),
        ("Constant clamp beyond the edges", AddressingCase(L(2, ClampMode.Constant).set_dimension(10, 12)
                                                           .slice((4, 6), (16, 16)).set_clamp_value(0xB800), 16, 16)),
        ("transposed view (column-major source)",
         AddressingCase(L(2, ClampMode.Constant).set_dimension(16, 16), 16, 16, V(2, False, (1, 0)))),
        ("negative offset, ClampToEdge", AddressingCase(L(2, ClampMode.ClampToEdge).set_dimension(9, 7)
                                                        .slice((-4, -3), (16, 16)), 16, 16)),
        ("Repeat far out of bounds", AddressingCase(L(2, ClampMode.Repeat).set_dimension(5, 3)
                                                    .slice((-1000, 7), (16, 16)), 16, 16)),
        ("MirrorRepeat, L = 1 and L = 4", AddressingCase(L(2, ClampMode.MirrorRepeat).set_dimension(1, 4)
                                                         .slice((-2, -6), (16, 16)), 16, 16)),
        ("store discards out of bounds", AddressingCase(L(2, ClampMode.Constant).set_dimension(10, 10)
                                                        .slice((-3, 4), (16, 16)), 16, 16, op="store")),
        ("blocks of 2x4 (decode coordinates)", AddressingCase(L(2, ClampMode.Constant).set_block_size(2, 4)
                                                              .set_dimension(16, 32), 16, 16)),
        ("3-D permuted view", AddressingCase(L(3, ClampMode.Constant).set_dimension(4, 4, 16), 16, 16,
                                             V(3, False, (2, 0, 1)))),
        ("4-D tile swizzle of a 2-D layout", AddressingCase(L(2, ClampMode.Constant).set_dimension(16, 16), 16, 16,
                                                            V(4, True, (0, 2, 1, 3)).set_dimensions(4, 4, 4, 4))),
        ("clip with default span and an offset", AddressingCase(L(2, ClampMode.Constant).set_dimension(16, 16), 16, 16,
                                                                V(2, False).set_clip(3, 0xFFFFFFFF, 2, 0xFFFFFFFF))),
        ("5-D layout, uint32 stride wraparound",
         AddressingCase(L(5, ClampMode.Repeat).set_dimension(2, 3, 2, 3, 4).set_stride(0xFFFFFFFF, 7, 1, 100, 1)
                        .slice((-1, 0, 1, -2, 3), (2, 3, 2, 3, 4)), 16, 16)),
    ]
    return shows


SHOWCASE = [name for name, _ in _showcase()]
def _case_matches(result: AddressingResult, k: int, case) -> bool:
    indices, status, block, inblock = reference_arrays(case, result.indices.shape[1])
    return bool(np.array_equal(indices, result.indices[k]) and np.array_equal(status, result.status[k])
                and np.array_equal(block, result.block_coord[k]) and np.array_equal(inblock, result.coord_in_block[k]))


class DemoSummary(dict):
    """:func:`portable_demo`'s result: a dict (JSON-able) with ``ok`` and ``describe()`` for the CLI."""

    @property
    def ok(self) -> bool:
        return self["mismatches"] == 0 and not self["validation_messages"] and all(s["ok"] for s in self["showcase"])

    def describe(self) -> str:
        lines = [f"{name['name']}: {'ok' if name['ok'] else 'MISMATCH'}" for name in self["showcase"]]
        lines.append(f"{self['cases']} cases on {self['device']}: {self['mismatches']} mismatches, "
                     f"{self['seconds']} s ({self['cases_per_s']} cases/s)")
        if self["validation_messages"]:
            lines.append(f"{len(self['validation_messages'])} validation messages, first: "
                         f"{self['validation_messages'][0]}")
        if self["first_mismatch"]:
            lines.append("first mismatch (shrunk):\n" + self["first_mismatch"]["glsl"] + "\n"
                         + self["first_mismatch"]["reference_view"])
        return "\n".join(lines)


def portable_demo(device=None, *, cases: int = 2000, seed: int = 0, progress: bool = False,
         validate: bool | None = None) -> DemoSummary:
    """Dispatch the showcase and ``cases`` random fuzz cases through the portable shader on ``device``
    (a vkcoop.vk.Device, an index/name, or None for the default; ``validate`` enables the validation layer
    when the device is opened here) and compare with vkcoop.tensor."""
    from ..fuzz import run as fuzz_run
    started = time.perf_counter()
    named = _showcase()
    with PortableRunner(device, validate=validate) as runner:
        result = runner.run([case for _, case in named])
        showcase = [{"name": name, "ok": _case_matches(result, k, case)} for k, (name, case) in enumerate(named)]
        report = None
        if cases:
            report = fuzz_run(cases=cases, seed=seed, target="portable", progress=progress,
                              device=runner.device, shrink=True, workers=0)  # no fork after the driver loaded
        device_name = runner.device.physical.name
        messages = [str(m) for m in runner.device.validation_messages]
    mismatches = sum(not s["ok"] for s in showcase) + (report.mismatch_count if report else 0)
    total = len(named) + (cases or 0)
    seconds = time.perf_counter() - started
    first = None
    if report and report.mismatches:
        first = report.mismatches[0].to_json()
    return DemoSummary(device=device_name, cases=total, mismatches=mismatches, seconds=round(seconds, 3),
                       cases_per_s=round(total / seconds, 1), showcase=showcase, first_mismatch=first,
                       validation_messages=messages)


def _shader_step() -> int:
    """Step 1: every shader variant compiled and validated; the number of failed steps (0 or 1)."""
    console.print(Rule("1. shader toolchain and every shader variant"))
    report = toolchain_report()
    print_toolchain(report)
    if not report["chosen"]:
        console.print("[red]no coopmat2-capable shader toolchain[/red]: run `vkcoop toolchain install`")
        return 1
    # Unchanged variants are answered by the SPIR-V cache and the remembered spirv-val passes; the demo prints no
    # reflection, so it takes none.
    results = check_shaders("check", select_variants(None), reflect=False)
    bad = [r for r in results if not r.ok]
    for r in bad:
        console.print(f"[red]FAILED[/red] {r.variant.label}\n{r.error}")
    console.print(f"{len(results) - len(bad)} of {len(results)} variants compiled and validated")
    return int(bool(bad))


def _portable_step(device, validate) -> tuple[dict | None, int]:
    """Step 2: (the device's capability report, or None where there is no Vulkan device; failed steps)."""
    from .. import vk

    console.print(Rule("2. portable tensor addressing on this machine's Vulkan, checked against vkcoop.tensor"))
    try:
        (caps,) = device_reports(device)
    except vk.NoDeviceError as error:
        console.print(f"[yellow]skipped:[/yellow] no Vulkan device ({error}); `vkcoop info` says what is found")
        return None, 0
    console.print(f"device: [bold]{caps['name']}[/bold] ({caps['driver_info']})")
    summary = portable_demo(device, validate=validate)
    console.print(summary.describe())
    return caps, int(not summary.ok)


def _samples_step(caps: dict | None, device, validate) -> int:
    """Step 3: the coopmat2 sample suite where the device has coopmat2; failed steps (0 or 1)."""
    console.print(Rule("3. the cooperative_matrix2 sample suite"))
    if caps is None or not caps["cooperative_matrix2"]["supported"]:
        name = "no Vulkan device" if caps is None else f"{caps['name']} has no VK_NV_cooperative_matrix2"
        console.print(f"[yellow]skipped:[/yellow] {name}, so the coopmat2 samples can't run here (`vkcoop list` "
                      "shows what each needs; `vkcoop info` what this device has)")
        return 0
    results = run_samples(choose_samples([], True), device, validate)
    print_results(results)
    return int(any(r.status == "fail" for r in results))


def cmd_demo(args) -> int:
    """0 when every step that could run here passed and the portable port was dispatched (the coopmat2 suite is
    skipped, with its reason, on a device without coopmat2); 1 when a step failed; 3 with no Vulkan device."""
    check_device(args.device)
    failures = _shader_step()
    caps, failed = _portable_step(args.device, args.validate)
    failures += failed + _samples_step(caps, args.device, args.validate)
    if failures:
        console.print(f"demo [red]failed ({failures} step(s))[/red]")
        return Exit.FAILED
    if caps is None:
        raise nothing_ran_error("Vulkan dispatch", ["no Vulkan device"], "install a Vulkan driver (lavapipe will "
                                "do: scripts/setup.sh installs it)")
    skipped = "" if caps["cooperative_matrix2"]["supported"] else " (step 3 skipped: see why above)"
    console.print(f"demo [green]passed[/green]{skipped}")
    return Exit.OK


def add_demo_parser(sub) -> None:
    p = sub.add_parser("demo", help=command_help("demo"),
                       description="Compile and validate every shader variant, dispatch the portable tensor-"
                                   "addressing port on any Vulkan device (lavapipe will do), and on a device with "
                                   "VK_NV_cooperative_matrix2 run the sample suite. Exit 0 when all that could run "
                                   "here passed (the suite skipped, with its reason, on a device without coopmat2); "
                                   "3 when no Vulkan device could be dispatched to.")
    add_device_argument(p)
    add_validate_argument(p, "run")
    p.set_defaults(func=cmd_demo, needs_toolchain=True)
