"""vkcoop.inspect.loops: the loops of a listing and what one pass over each issues, on hand-written listings
(both branch forms nvdisasm prints) and on the driver's real code (the H100 cache fixtures)."""
from __future__ import annotations

from test_inspect_nvuc import FIXTURES, NVDISASM, needs_nvdisasm

from vkcoop.inspect import core, loops, sass

# HAND-WRITTEN, NOT DRIVER OUTPUT: a cubin-style kernel (label branches) with an outer loop around an inner MMA
# loop that has two back edges (a `continue`), a forward branch, and the trap loop nvdisasm prints after EXIT.
LABELLED = """\
\t.section\t.text.nested,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=40"
.text.nested:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_1:
        /*0010*/                   LDG.E.128 R8, desc[UR4][R2.64] ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_2:
        /*0030*/                   LDSM.16.M88.4 R12, [R3] ;
        /*0040*/                   HMMA.16816.F32 R16, R12, R14, R16 ;
        /*0050*/               @P1 BRA `(.L_x_2) ;
        /*0060*/                   HMMA.16816.F32 R20, R12, R14, R20 ;
        /*0070*/                   MUFU.EX2 R4, R4 ;
        /*0080*/                   FADD R5, R4, R5 ;
        /*0090*/               @P2 BRA `(.L_x_2) ;
        /*00a0*/               @P3 BRA `(.L_x_3) ;
        /*00b0*/               @P0 BRA `(.L_x_1) ;
.L_x_3:
        /*00c0*/                   EXIT ;
.L_x_4:
        /*00d0*/                   BRA `(.L_x_4);
"""

# The raw form (``nvdisasm --binary SM90``: no sections, branch targets as addresses), as in the driver's code.
RAW = """\
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0020*/                   HMMA.16816.F32 R6, R8, R12, R6 ;
        /*0030*/                   FMNMX R2, R2, R3, !PT ;
        /*0040*/              @!P0 BRA 0x10 ;
        /*0050*/                   EXIT ;
        /*0060*/                   BRA 0x60;
"""


def test_nested_loops_with_two_back_edges_are_found_by_label():
    (kernel,) = sass.parse_listing(LABELLED)
    assert kernel.labels == {".L_x_1": 0x10, ".L_x_2": 0x30, ".L_x_3": 0xc0, ".L_x_4": 0xd0}
    outer, inner = loops.find_loops(kernel)
    assert (outer.start, outer.end, outer.inner) == (0x10, 0xb0, 1)
    assert (inner.start, inner.end, inner.inner) == (0x30, 0x90, 0)       # ends at the later back edge
    assert inner.mix.total == 7 and inner.mma == 2 and inner.instructions_per_mma == 3.5
    assert inner.mix.shared["LDSM"] == 1 and inner.mix.opcodes["MUFU"] == 1 and inner.fp32_alu() == 1
    assert outer.mix.total == 11 and sum(outer.mix.global_loads.values()) == 1 and outer.mix.barriers
    assert loops.mma_loops([outer, inner]) == [inner]    # the outer loop only holds the inner one's MMAs


def test_raw_listings_branch_to_addresses_and_trap_loops_are_not_loops():
    (kernel,) = sass.parse_listing(RAW)
    (loop,) = loops.find_loops(kernel)
    assert (loop.start, loop.end, loop.mix.total, loop.mma) == (0x10, 0x40, 4, 2)
    assert loop.to_dict()["start"] == "0x10" and loop.to_dict()["instructions_per_mma"] == 2.0
    assert loops.find_loops(sass.parse_listing("        /*0000*/   EXIT ;\n")[0]) == []


def test_a_branch_to_a_label_that_marks_nothing_is_left_out():
    (kernel,) = sass.parse_listing("        /*0000*/   HMMA.16816.F32 R4, R8, R12, R4 ;\n"
                                   "        /*0010*/   BRA `(.L_x_9) ;\n")
    assert kernel.branches == {1: ".L_x_9"} and kernel.branch_targets() == {} and loops.find_loops(kernel) == []


def _hmma_per_step(tile_m: int, tile_n: int, tile_k: int, invocations: int) -> int:
    """HMMA.16816 one warp issues per K step of a workgroup tile: its m16n8 output blocks times k16 steps."""
    return tile_m * tile_n // (invocations // 32) // (16 * 8) * (tile_k // 16)


@needs_nvdisasm
def test_the_peak_kernels_only_loop_holds_every_mma_and_nothing_else_that_waits():
    # peak/: workgroup tile 128x256x32 over 256 invocations, one K step per iteration (fixture README)
    (report,) = core.report_cache(FIXTURES / "peak", NVDISASM, "SM90")[1]
    (kernel,) = report.kernels
    (loop,) = loops.mma_loops(kernel.loops)
    assert loop.mma == _hmma_per_step(128, 256, 32, 256) == sum(kernel.mix.mma.values())
    assert not loop.mix.global_loads and not loop.mix.shared and not loop.mix.barriers and not loop.mix.spills


@needs_nvdisasm
def test_the_dense_gemm_loops_are_its_unrolled_k_loops():
    # gemm-dense/: 256:128x256x32u8g8, so an unrolled main loop issues 8 K steps of MMAs (fixture README)
    (report,) = core.report_cache(FIXTURES / "gemm-dense", NVDISASM, "SM90")[1]
    (kernel,) = report.kernels
    found = loops.mma_loops(kernel.loops)
    step = _hmma_per_step(128, 256, 32, 256)
    assert max(loop.mma for loop in found) == 8 * step
    assert all(loop.mma % step == 0 for loop in found)
    assert sum(loop.mma for loop in found) == sum(kernel.mix.mma.values())    # no MMA outside the loops
    aligned = [loop for loop in found if loop.mma == 8 * step and set(loop.mix.global_loads) == {128}]
    clamped = [loop for loop in found if loop.mix.global_loads.get(16)]
    assert aligned and clamped     # the aligned loop moves 128-bit vectors; the clamped copy 16-bit scalars
    assert min(a.instructions_per_mma for a in aligned) < min(c.instructions_per_mma for c in clamped)
