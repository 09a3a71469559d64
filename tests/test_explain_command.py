"""``vkcoop explain`` as a program: bad input exits 2 with one line, missing needs exit 3, the outputs
(terminal, JSON, PNG, GLSL, decode) say what the reference says; and --check's comparison and marking on
synthetic and emulated hardware output, plus the real thing on a coopmat2 device (gpu)."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support import child_env
from test_fuzz_hw import EmulatedHwRunner, _coopmat2_device, _floor_strides, _repeat_instead_of_mirror
from vkcoop.cli import explain as explain_command
from vkcoop.fuzz import explain_check
from vkcoop.fuzz import hw

ROOT = Path(__file__).resolve().parents[1]


def cli(*argv, first_paths=()):
    """Run ``python -m vkcoop explain`` from the checkout, standard input empty; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "vkcoop", "explain", *argv], cwd=ROOT, env=child_env(*first_paths),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def in_process(*argv, stdin: str | None = None):
    """(exit status, stdout) of main(argv) in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        if stdin is not None:
            with _stdin(stdin):
                status = explain_command.main(list(argv))
        else:
            status = explain_command.main(list(argv))
    return status, out.getvalue()


def in_process_result(*argv, stdin: str = ""):
    """main(argv) in this process, standard input ``stdin``, as a CompletedProcess (an argparse refusal leaves
    main through SystemExit, as it leaves the process)."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out), _stdin(stdin):
        try:
            status = explain_command.main(list(argv))
        except SystemExit as exit_:
            status = exit_.code
    return subprocess.CompletedProcess(argv, status, out.getvalue(), err.getvalue())


@contextlib.contextmanager
def _stdin(text):
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


def assert_one_line_error(result, status: int, *words):
    assert result.returncode == status, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vkcoop: error: ") and "; " in lines[0], lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]


BAD = [
    (["--dims", "6,x"], "not a comma-separated list"),
    (["--dims", "1,2,3,4,5,6"], "1..5"),
    (["--dims", "6,8", "--slice", "1,2,3"], "--slice needs 4 values"),
    (["--dims", "6,8", "--clamp", "Wrap"], "not a clamp mode"),
    (["--dims", "6,8", "--matrix", "4by8"], "ROWSxCOLS"),
    (["--dims", "6,8", "--matrix", "0x8"], "no cells"),
    (["--dims", "4,4", "--view-perm", "1,0,2"], "hasDimensions false"),
    (["--dims", "6,8", "--view-perm", "0,0"], "permutation"),
    (["--dims", "6,8", "--block", "0,1"], "block_size"),
    (["--dims", "6,8", "--slice", "0,0,0,8"], "span[0] is 0"),
    (["--dims", "6,8", "--view-dims", "0,4"], "view_dimension[0] is 0"),
    (["--clip", "0,1,0,1"], "needs --dims"),
    (["--glsl", "no-such-file.glsl"], "cannot read --glsl"),
    (["--glsl", "no-such-file.glsl", "--dims", "4"], "use one form"),
    (["--dims", "4,4", "--store", "--decode"], "--decode"),
    (["--dims", "4,4", "--block", "2,2", "--store"], "cannot be stored"),
    (["--dims", "4,4", "--glsl-out", "--json", "-"], "standard output"),
    (["--dims", "16,16", "--matrix", "4x8", "--check"], "--matrix Rx16"),
    (["--dims", "16,16", "--clamp", "Undefined", "--slice", "-1,16,0,16", "--check"], "undefined"),
    (["--dims", "4,4", "--json", "no/such/dir/x.json"], "does not exist"),
    (["--dims", "4,4", "--device", "0"], "--device"),
    (["--no-such-option"], "unrecognized arguments"),
    ([], "builds no tensor layout"),            # nothing on options, empty standard input
]


@pytest.mark.parametrize("argv, words", BAD, ids=[" ".join(a) or "empty" for a, _ in BAD])
def test_bad_input_exits_2_with_one_line(argv, words):
    assert_one_line_error(in_process_result(*argv), 2, words)


# One of each way out of the process: argparse's refusal (SystemExit), the command's own (an option value), and
# nothing given at all (standard input at its end).
AS_PROCESS = [(argv, words) for argv, words in BAD if words in (
    "unrecognized arguments", "not a comma-separated list", "builds no tensor layout")]


@pytest.mark.parametrize("argv, words", AS_PROCESS, ids=[" ".join(a) or "empty" for a, _ in AS_PROCESS])
def test_bad_input_as_a_process_exits_2_with_one_line_and_no_traceback(argv, words):
    assert len(AS_PROCESS) == 3
    assert_one_line_error(cli(*argv), 2, words)


# (options, the limit the refusal must name, the limit it must not name): a matrix side may have at most 1024
# cells (the flexible-dimensions maximum), and explain shows at most 65536 cells.
SIZE_LIMITS = [
    (["--dims", "256,512", "--matrix", "256x512"], "131072 cells, over the 65536", "1024"),
    (["--dims", "256,512"], "131072 cells, over the 65536", "1024"),
    (["--dims", "6,8", "--matrix", "2000x8"], "2000 rows, over the 1024", "65536"),
    (["--dims", "6,8", "--matrix", "8x1025"], "1025 columns, over the 1024", "65536"),
    (["--dims", "2000,5"], "more rows than the 1024", "65536"),
]


@pytest.mark.parametrize("argv, named, not_named", SIZE_LIMITS, ids=[" ".join(a) for a, _, _ in SIZE_LIMITS])
def test_a_matrix_too_big_is_refused_naming_the_limit_it_exceeds(argv, named, not_named):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = explain_command.main(argv)
    line = err.getvalue().strip()
    assert status == 2 and named in line and not_named not in line, line


def test_a_matrix_at_the_limits_is_explained():
    status, out = in_process("--dims", "64,1024", "--json", "-")     # 1024 columns, 65536 cells: both limits
    assert status == 0 and json.loads(out)["matrix"] == {"rows": 64, "cols": 1024}


# glslang's coopmat2 tests load through a 5-D view on a 2-D layout. With hasDimensions false the view's
# dimensions are the layout's span (linearToViewCoord), one per layout dimension, so there the counts must
# agree (docs/spec-notes.md 17); with hasDimensions true the view has its own dimensions, any count.
LAYOUT_2D = """tensorLayoutNV<2> t = createTensorLayoutNV(2);
t = setTensorLayoutBlockSizeNV(t, 4, 8);
t = setTensorLayoutDimensionNV(t, 256, 512);
t = sliceTensorLayoutNV(t, 128, 32, 256, 32);
"""


def test_a_view_of_more_dimensions_than_the_layout_without_its_own_is_refused_in_one_line():
    view = ("tensorViewNV<5> v = createTensorViewNV(5);\nv = setTensorViewDimensionsNV(v, 10, 11, 12, 13, 14);\n"
            "v = setTensorViewClipNV(v, 0, 16, 0, 16);\n")
    for argv in ([], ["--matrix", "16x16"]):          # with no --matrix the default shape is where it broke
        assert_one_line_error(in_process_result(*argv, stdin=LAYOUT_2D + view), 2, "5-D tensor view with hasDimensions false",
                              "2-D layout", "createTensorViewNV(5, true)")


def test_a_view_of_more_dimensions_than_the_layout_with_its_own_is_explained():
    from vkcoop.tensor.glsl import parse
    from vkcoop.tensor.spec import element_address
    view = "tensorViewNV<5, true> v = createTensorViewNV(5, true);\nv = setTensorViewDimensionsNV(v, 2, 2, 2, 2, 4);\n"
    result = in_process_result("--json", "-", stdin=LAYOUT_2D + view)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # Default shape: the innermost view dimension as columns, the other four as rows.
    assert data["matrix"] == {"rows": 2 * 2 * 2 * 2, "cols": 4}
    program = parse(LAYOUT_2D + view)
    expected = [[element_address(program.layout, r, c, 4, program.view).index for c in range(4)] for r in range(16)]
    assert data["index"] == expected           # the scalar pseudo-code, cell by cell


def test_the_readme_s_explain_example_shows_a_clamp_mode_at_work():
    import re
    readme = (ROOT / "README.md").read_text()
    argv = re.search(r"`vkcoop explain ([^`\[]+)", readme)[1].split()
    status, out = in_process(*argv, "--json", "-")
    counts = json.loads(out)["counts"]
    assert status == 0 and counts.get("in_bounds") and set(counts) - {"in_bounds"}, counts


def _on_a_terminal(argv, typed: bytes = b""):
    """(exit status, stdout, stderr) of ``python -m vkcoop explain ARGV`` with a terminal as standard input;
    ``typed`` is written to the terminal, then end-of-file (Ctrl-D)."""
    import os
    import pty
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "vkcoop", "explain", *argv], cwd=ROOT, env=child_env(),
                                   stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if typed:
            os.write(controller, typed + b"\n\x04")
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            pytest.fail(f"vkcoop explain {' '.join(argv)} waited on the terminal")
    finally:
        os.close(controller)
        os.close(terminal)
    return process.returncode, out.decode(), err.decode()


def test_no_layout_on_a_terminal_prints_the_usage_and_reads_nothing():
    status, out, err = _on_a_terminal([])
    assert status == 2 and out == "", err
    assert err.startswith("usage: vkcoop explain ") and "--dims" in err and "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("vkcoop: error: ")]
    assert len(errors) == 1 and "no layout given" in errors[0] and "--dims" in errors[0], err


def test_glsl_dash_reads_the_terminal_when_asked():
    status, out, err = _on_a_terminal(["--glsl", "-", "--json", "-"],
                                      b"t = createTensorLayoutNV(1);\nt = setTensorLayoutDimensionNV(t, 3);")
    assert status == 0, err
    assert json.loads(out)["index"] == [[0, 1, 2]] and "Ctrl-D" in err


def test_a_glsl_error_on_stdin_names_line_and_column():
    result = in_process_result("--glsl", "-",
                               stdin="t = createTensorLayoutNV(2);\nt = setTensorLayoutDimensionNV(t, 4);\n")
    assert_one_line_error(result, 2, "<stdin>: line 2, column 5", "takes 3 arguments")


def test_check_without_a_coopmat2_device_exits_3():
    if _coopmat2_device():
        pytest.skip("this machine has a coopmat2 device")
    result = in_process_result("--dims", "16,16", "--clamp", "Repeat", "--matrix", "16x16", "--check")
    assert_one_line_error(result, 3, "--check needs")


def test_png_without_matplotlib_exits_3(tmp_path):
    blocker = tmp_path / "blocker" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is blocked for this test')\n")
    result = cli("--dims", "4,4", "--png", str(tmp_path / "x.png"),
                 first_paths=[blocker.parent])
    assert_one_line_error(result, 3, "--png needs matplotlib")
    assert not (tmp_path / "x.png").exists()


# --------------------------------------------------------------------------- outputs

def test_json_maps_are_rows_by_cols_and_say_what_the_reference_says():
    # 3-wide tensor, Constant, column offset -1, span 5: columns read c = -1, 0, 1, 2, 3.
    status, out = in_process("--dims", "2,3", "--clamp", "Constant", "--slice", "0,2,-1,5", "--matrix", "2x5",
                             "--json", "-")
    assert status == 0
    data = json.loads(out)
    assert data["index"] == [[-1, 0, 1, 2, -1], [-1, 3, 4, 5, -1]]
    assert data["status"][0] == ["clamp_value", "in_bounds", "in_bounds", "in_bounds", "clamp_value"]
    assert data["block_coord"][1][2] == [1, 1] and data["coord_in_block"][1][2] == [0, 0]
    assert data["block_coord"][0][0] == [-1, -1]
    assert data["layout"]["offset"] == [0, -1] and data["view"] is None


def test_decode_shows_block_coordinates():
    # Blocks of 2 columns: element (1, 3) is in block (1, 1) at (0, 1).
    status, out = in_process("--dims", "2,4", "--block", "1,2", "--matrix", "2x4", "--decode")
    assert status == 0
    assert "blockCoord/coordInBlock" in out and "1,1/0,1" in out


def test_glsl_on_stdin_explains_like_the_option_form():
    options = ["--dims", "6,8", "--clamp", "MirrorRepeat", "--slice", "-2,6,1,8", "--view-perm", "1,0",
               "--clip", "0,6,0,5", "--matrix", "8x6"]
    status, glsl = in_process(*options, "--glsl-out")
    assert status == 0 and "sliceTensorLayoutNV(t, -2, 6u, 1, 8u);" in glsl
    status, via_options = in_process(*options, "--json", "-")
    result = in_process_result("--matrix", "8x6", "--json", "-", stdin=glsl)
    assert status == 0 and result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(via_options)


def test_terminal_output_has_grid_legend_and_state(tmp_path):
    result = in_process_result("--dims", "4", "--clamp", "ClampToEdge", "--slice=-2,6", "--matrix", "1x6",
                 "--png", str(tmp_path / "edge.png"), "--json", str(tmp_path / "edge.json"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # c = -2 .. 3 against 4 elements: 0, 0 from the edge, then 0 1 2 3.
    assert out.splitlines()[2].split() == ["0", "0e", "0e", "0", "1", "2", "3"]
    assert "clamped to the edge (2)" in out and "offset" in out and "(-2)" in out
    png = (tmp_path / "edge.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) < 60_000
    assert json.loads((tmp_path / "edge.json").read_text())["counts"] == {"in_bounds": 4, "clamped_to_edge": 2}


# --------------------------------------------------------------------------- --check logic on synthetic output

def test_findings_name_models_of_the_fuzzer():
    from vkcoop.fuzz import models
    assert set(explain_check.FINDINGS) <= set(models.MODELS) | set(models.TAGS)


def _explained(argv):
    request = explain_command.build_request(explain_command.add_arguments(explain_command._Parser()).parse_args(argv))
    return explain_command.compute(request)


def test_hardware_case_matches_the_access():
    e = _explained(["--dims", "4,20", "--clamp", "Constant", "--clamp-value", "0x3C00", "--matrix", "3x16"])
    case = explain_check.hardware_case(e)
    assert case.variant.kind == "load" and (case.rows, case.cols) == (16, 16)
    assert case.layout.clamp_value == explain_check.SAFE_CLAMP_VALUE    # fp16 1.0 is the shader's marker
    assert case.layout.layout_dimension == (4, 20) and not case.explicit_stride
    block = _explained(["--dims", "4,20", "--block", "1,3", "--stride", "9,1", "--matrix", "16x16"])
    case = explain_check.hardware_case(block)
    assert case.variant.kind == "decode" and case.explicit_stride


def _flat_reference(case):
    from vkcoop.fuzz import compare
    return tuple(a[0] for a in compare.reference_batch([case], case.rows * case.cols))


def test_marks_exactly_the_cells_that_differ_and_leaves_them_unexplained():
    e = _explained(["--dims", "8,16", "--clamp", "Repeat", "--slice", "-1,8,0,16", "--matrix", "16x16"])
    case = explain_check.hardware_case(e)
    ref = _flat_reference(case)
    bad, finding, position = explain_check.mark_cells(case, (ref[0], ref[1], None, None))
    assert not bad.any() and not position
    observed = ref[0].copy()
    observed[[5, 37]] += 1                        # two cells read the wrong element
    status = ref[1].copy()
    status[200] = hw.STATUS_GARBAGE               # one reads garbage
    bad, finding, _ = explain_check.mark_cells(case, (observed, status, None, None))
    assert np.flatnonzero(bad).tolist() == [5, 37, 200] and set(finding[bad]) == {""}


def test_f1_floor_strides_are_named():
    # The spec-notes.md F1 repro: block 1x2 over a 2x1 tensor; ceiling gives stride (1, 1), floor (0, 1).
    e = _explained(["--dims", "2,1", "--block", "1,2", "--clamp", "Repeat", "--matrix", "16x16"])
    case = explain_check.hardware_case(e)
    runner = EmulatedHwRunner(_floor_strides)
    result = explain_check.run_check(e, runner=runner)
    assert result.mismatch.any() and set(result.finding[result.mismatch]) == {"F1"}
    assert not result.unexplained and result.findings() == {"F1": int(result.mismatch.sum())}
    assert case.variant.kind == "decode"


def test_f2_mirror_repeat_on_a_unit_dimension_is_named():
    e = _explained(["--dims", "1,8", "--clamp", "MirrorRepeat", "--matrix", "16x16"])
    case = explain_check.hardware_case(e)
    garbage = (np.full(256, -1), np.full(256, hw.STATUS_GARBAGE, dtype=np.uint8), None, None)
    bad, finding, _ = explain_check.mark_cells(case, garbage)
    assert bad.all() and set(finding) == {"F2"}
    # The same garbage from a layout without a unit dimension is no known finding.
    e = _explained(["--dims", "2,8", "--clamp", "MirrorRepeat", "--matrix", "16x16"])
    bad, finding, _ = explain_check.mark_cells(explain_check.hardware_case(e), garbage)
    assert bad.all() and set(finding) == {""}


def test_check_exit_status_is_1_for_an_unexplained_mismatch(monkeypatch, tmp_path):
    # A "driver" that repeats where it should mirror, behind the command's whole --check path.
    monkeypatch.setattr(explain_check, "open_device", lambda device=None: None)
    monkeypatch.setattr(hw, "HwRunner", lambda device, variants, threads: EmulatedHwRunner(_repeat_instead_of_mirror))
    argv = ["--dims", "16,8", "--clamp", "MirrorRepeat", "--slice", "0,16,-3,16", "--matrix", "16x16", "--check",
            "--json", str(tmp_path / "check.json")]
    status, out = in_process(*argv)
    data = json.loads((tmp_path / "check.json").read_text())["check"]
    # Columns read c = -3..12 of an 8-wide tensor; mirror (period 14) and repeat agree only at c = 11 (both
    # give 3), so 7 of the 8 out-of-bounds columns differ in each of the 16 rows.
    assert status == 1 and data["findings"] == {"unexplained": 16 * 7} and not data["ok"]
    assert "!" in out and "unexplained" in out
    monkeypatch.setattr(hw, "HwRunner", lambda device, variants, threads: EmulatedHwRunner())
    status, out = in_process(*argv)
    assert status == 0 and "no cell differs from the reference" in out


@pytest.mark.gpu
def test_check_on_coopmat2_hardware_names_f2_for_mirror_repeat_with_a_unit_dimension(tmp_path):
    if not _coopmat2_device():
        pytest.skip("no Vulkan device with VK_NV_cooperative_matrix2")
    status, out = in_process("--dims", "1,8", "--clamp", "MirrorRepeat", "--matrix", "16x16", "--check",
                             "--json", str(tmp_path / "f2.json"))
    check = json.loads((tmp_path / "f2.json").read_text())["check"]
    assert status == 0, out
    assert "F2" in check["findings"] and "unexplained" not in check["findings"], check["findings"]
    status, out = in_process("--dims", "2,8", "--clamp", "MirrorRepeat", "--slice=-1,2,-3,8", "--matrix",
                             "16x16", "--check")
    assert status == 0 and "no cell differs from the reference" in out, out



def test_the_guide_s_figures_exist_are_small_and_their_commands_run():
    import re
    PIL_Image = pytest.importorskip("PIL.Image")
    guide = (ROOT / "docs" / "tensor-addressing.md").read_text()
    figures = []
    for match in re.finditer(r"!\[[^\]]*\]\((img/[^)]+)\)", guide):
        # The command printed above a figure is the last one before it.
        commands = re.findall(r"`vkcoop explain ([^`]+)`", guide[:match.start()])
        figures.append((commands[-1], match[1]))
    assert len(figures) == len(set(image for _, image in figures)) >= 11
    for argv, image in figures:
        path = ROOT / "docs" / image
        assert path.is_file() and path.stat().st_size < 60_000, image
        with PIL_Image.open(path) as picture:      # the command that drew it, in its metadata
            assert picture.text["Description"] == f"vkcoop explain {argv}", image
        status, out = in_process(*argv.split(), "--json", "-")
        assert status == 0 and json.loads(out)["matrix"], argv
