"""``vkcoop demo``: the README's first command.

1. compiles and validates every shader variant with the coopmat2 toolchain;
2. dispatches the portable tensor-addressing port on whatever Vulkan device exists (lavapipe will do)
   and checks every element against :mod:`vkcoop.tensor`;
3. on a device with VK_NV_cooperative_matrix2, runs the whole sample suite against the reference.

Nothing is reported as passed that was not dispatched; what this machine can't run is named with the reason.
"""
from __future__ import annotations

from rich.console import Console
from rich.rule import Rule

console = Console()


def main(args) -> int:
    from . import cli

    failures = 0
    console.print(Rule("1. shader toolchain and every shader variant"))
    failures += cli.cmd_toolchain(_ns(action="show", dest=None, debs=None, force=False, json=False)) != 0
    failures += cli.cmd_shaders(_ns(action="check", pattern=None, first=False, json=False)) != 0

    console.print(Rule("2. portable tensor addressing on this machine's Vulkan, checked against vkcoop.tensor"))
    from . import vk
    try:
        caps = vk.capabilities(args.device)
    except vk.VulkanError as exc:
        console.print(f"[red]no Vulkan device: {exc}[/red]")
        return 1
    console.print(f"device: [bold]{caps['name']}[/bold] ({caps['driver_info']})")
    from . import portable
    summary = portable.demo(args.device, validate=args.validate)
    console.print(summary.describe())
    failures += not summary.ok

    console.print(Rule("3. the cooperative_matrix2 sample suite"))
    if caps["cooperative_matrix2"]["supported"]:
        failures += cli.cmd_run(_ns(samples=[], all=True, validate=args.validate, device=args.device, json=None)) != 0
    else:
        console.print(f"[yellow]skipped:[/yellow] {caps['name']} has no VK_NV_cooperative_matrix2, so the "
                      "coopmat2 samples can't run here (`vkcoop list` shows what each needs; `vkcoop info` "
                      "what this device has)")
    console.print("demo " + ("[green]passed[/green]" if not failures else f"[red]failed ({failures} step(s))[/red]"))
    return 1 if failures else 0


def _ns(**kwargs):
    import argparse
    return argparse.Namespace(**kwargs)
