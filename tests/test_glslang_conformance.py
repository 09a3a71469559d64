"""glslang's own GL_NV_cooperative_matrix2 test shaders (tests/external/glslang, PROVENANCE.md there) as an
external conformance test: each compiles and validates through spirv_tools the way glslang's test harness
compiles it, or is refused with exactly the error lines of glslang's baseline; and every tensor layout and view
they declare goes through ``vkcoop explain`` without an internal error. Also spirv_tools' own option for that
harness, ``assign_missing_bindings``."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import pytest

from support import toolchain_or_skip

VENDORED = Path(__file__).resolve().parent / "external" / "glslang"
SHADERS = sorted(VENDORED.glob("*.comp"))
BASELINES = VENDORED / "baseResults"
#: glslang runs these shaders in CompileToSpirv16Test: Vulkan 1.3 and 1.4, SPIR-V 1.6, bindings auto-mapped.
TARGET_ENVS = ("vulkan1.3", "vulkan1.4")
_BASELINE_ERROR = re.compile(r"^ERROR: 0:(\d+): (.*)$", re.M)
_BASELINE_TOTAL = re.compile(r"^ERROR: (\d+) compilation errors\.", re.M)
_LOG_ERROR = re.compile(r"^(.+?):(\d+): error: (.*)$", re.M)


# --------------------------------------------------------------------------- the vendored files

def provenance_sums() -> dict[str, str]:
    """PROVENANCE.md's table: vendored file (relative path) -> SHA-256."""
    rows = re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", (VENDORED / "PROVENANCE.md").read_text(), re.M)
    return {path: digest for path, digest in rows}


def test_the_vendored_files_are_exactly_those_provenance_lists_byte_for_byte():
    listed = provenance_sums()
    present = {p.relative_to(VENDORED).as_posix() for p in VENDORED.rglob("*") if p.is_file()}
    assert present - {"PROVENANCE.md", ".gitattributes"} == set(listed)
    changed = [path for path, digest in listed.items()
               if hashlib.sha256((VENDORED / path).read_bytes()).hexdigest() != digest]
    assert not changed, f"differ from glslang's: {changed}"


def test_the_set_is_glslang_s_coopmat2_shaders_and_the_baselines_of_those_it_refuses():
    assert len(SHADERS) >= 6
    for shader in SHADERS:
        assert re.search(rb"^#extension GL_NV_cooperative_matrix2 : enable", shader.read_bytes(), re.M), shader.name
    for baseline in BASELINES.iterdir():
        assert (VENDORED / baseline.name.removesuffix(".out")).is_file(), baseline.name
        assert "No code generated" in baseline.read_text(), f"{baseline.name} is not a refusal"


# --------------------------------------------------------------------------- compile or refuse as glslang does

def expected_errors(shader: Path) -> Counter | None:
    """(line, message) of every error glslang's baseline lists for ``shader``; None when it has no baseline
    (glslang compiles it)."""
    baseline = BASELINES / f"{shader.name}.out"
    if not baseline.exists():
        return None
    text = baseline.read_text()
    errors = Counter((int(line), message.strip()) for line, message in _BASELINE_ERROR.findall(text))
    total = _BASELINE_TOTAL.search(text)
    assert total and int(total[1]) == sum(errors.values()), f"{baseline.name}: read {sum(errors.values())} errors"
    return errors


def reported_errors(log: str, shader: Path) -> Counter:
    """(line, message) of every error the compiler's log reports in ``shader``."""
    return Counter((int(line), message.strip()) for file, line, message in _LOG_ERROR.findall(log)
                   if Path(file).name == shader.name)


def test_the_error_matcher_catches_a_moved_a_missing_and_an_extra_error():
    shader = VENDORED / "spv.coopmat2_error.comp"
    want = expected_errors(shader)
    log = "".join(f"{shader}:{line}: error: {message}\n" for (line, message), n in want.items() for _ in range(n))
    assert reported_errors(log, shader) == want
    (line, message), = list(want)[:1]
    moved = log.replace(f":{line}: error:", f":{line + 1}: error:", 1)
    assert reported_errors(moved, shader) != want
    assert reported_errors(log.split("\n", 1)[1], shader) != want
    assert reported_errors(log + f"{shader}:1: error: 'x' : undeclared identifier\n", shader) != want


@pytest.mark.toolchain
@pytest.mark.parametrize("target_env", TARGET_ENVS)
@pytest.mark.parametrize("shader", SHADERS, ids=lambda p: p.name)
def test_glslang_s_shader_compiles_and_validates_or_is_refused_with_its_baseline_errors(shader, target_env):
    spirv_tools = toolchain_or_skip()
    want = expected_errors(shader)
    if want is None:
        spirv = spirv_tools.compile(path=shader, target_env=target_env, assign_missing_bindings=True)
        spirv_tools.validate(spirv, target_env)
        return
    with pytest.raises(spirv_tools.ShaderCompileError) as refused:
        spirv_tools.compile(path=shader, target_env=target_env, assign_missing_bindings=True)
    assert reported_errors(refused.value.log, shader) == want


# --------------------------------------------------------------------------- assign_missing_bindings

UNBOUND = """#version 450
layout(local_size_x = 1) in;
layout(set = 0, binding = 1) buffer Bound { uint bound[]; };
buffer Unbound { uint unbound[]; };
void main() { unbound[0] = bound[0]; }
"""


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "spirv-cache"))
    return tmp_path / "spirv-cache"


@pytest.mark.toolchain
def test_assign_missing_bindings_binds_what_the_source_leaves_unbound_and_keeps_the_rest(private_cache):
    spirv_tools = toolchain_or_skip()
    with pytest.raises(spirv_tools.ShaderCompileError, match="binding"):
        spirv_tools.compile(UNBOUND, name="unbound.comp")
    spirv = spirv_tools.compile(UNBOUND, name="unbound.comp", assign_missing_bindings=True)
    spirv_tools.validate(spirv)
    bindings = [(b.set, b.binding) for b in spirv_tools.reflect(spirv).bindings]
    assert len(bindings) == len(set(bindings)) == 2 and (0, 1) in bindings
    # Both ways go through the cache: a bound module there must not answer the compile that refuses.
    with pytest.raises(spirv_tools.ShaderCompileError, match="binding"):
        spirv_tools.compile(UNBOUND, name="unbound.comp")
    assert len(list(private_cache.glob("*.spvc"))) == 1


@pytest.mark.toolchain
def test_a_fully_bound_shader_is_the_same_module_with_or_without_assign_missing_bindings(private_cache):
    spirv_tools = toolchain_or_skip()
    bound = UNBOUND.replace("buffer Unbound", "layout(set = 0, binding = 0) buffer Unbound")
    assert spirv_tools.compile(bound, assign_missing_bindings=True) == spirv_tools.compile(bound)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_assign_missing_bindings_takes_only_a_bool(value):
    import spirv_tools
    with pytest.raises(spirv_tools.InputTypeError, match="assign_missing_bindings"):
        spirv_tools.compile(UNBOUND, assign_missing_bindings=value)


# The private libshaderc needs glibc 2.38; on Debian 12 its check runs in a Python started through the prefix's
# own loader (as tests/test_spirv_tools.py proves the binding).
SHADERC_CHECK = """
import sys
from pathlib import Path
from spirv_tools.shaderc import ShadercLibrary
library = ShadercLibrary(sys.argv[1])
source = Path(sys.argv[2]).read_text()
ok, spirv, log = library.compile(source, name="unbound.comp", assign_missing_bindings=True)
assert ok, log
Path(sys.argv[3]).write_bytes(spirv)
ok, _, log = library.compile(source, name="unbound.comp")
assert not ok
print(log)
"""


@pytest.mark.toolchain
def test_libshaderc_assigns_missing_bindings_as_glslc_does(tmp_path):
    spirv_tools = toolchain_or_skip()
    tc = spirv_tools.find_toolchain()
    if tc.name != "private" or tc.libshaderc is None:
        pytest.skip("needs the private toolchain prefix (vkcoop toolchain install)")
    source, out, via_glslc = tmp_path / "unbound.comp", tmp_path / "libshaderc.spv", tmp_path / "glslc.spv"
    source.write_text(UNBOUND)
    python = [sys.executable]
    try:
        from spirv_tools.shaderc import ShadercLibrary
        ShadercLibrary(tc.libshaderc).close()
    except OSError:
        python = [str(tc.loader), "--library-path", str(tc.library_path), sys.executable]
    proc = subprocess.run([*python, "-c", SHADERC_CHECK, str(tc.libshaderc), str(source), str(out)],
                          capture_output=True, text=True, cwd=VENDORED.parents[2])
    assert proc.returncode == 0, proc.stderr
    assert "binding" in proc.stdout
    tc.run("glslc", ["--target-env=vulkan1.3", "-fshader-stage=compute", "-fauto-bind-uniforms", str(source),
                     "-o", str(via_glslc)], check=True)
    assert out.read_bytes() == via_glslc.read_bytes()


# --------------------------------------------------------------------------- vkcoop explain

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_STATEMENT = re.compile(
    r"(?P<const>(?:layout\s*\([^)]*\)\s*)?const\s+(?:u?int(?:32_t)?|bool)\s+\w+\s*=[^;]*;)"
    r"|(?P<matrix>\bcoopmat\s*<[^;>]*?,\s*(?P<rows>\d+)\s*,\s*(?P<cols>\d+)\s*,[^;>]*>\s*(?P<matrix_name>\w+)[^;]*;)"
    r"|(?P<declaration>\b(?P<kind>tensorLayoutNV|tensorViewNV)\s*<[^;>]*>\s*(?P<declared>\w+)\s*=[^;]*;)"
    r"|(?P<assignment>\b(?P<assigned>\w+)\s*=\s*(?:create|set|slice)Tensor\w*NV\s*\([^;]*;)"
    r"|(?P<access>\bcoopMat(?P<op>Load|Store)TensorNV\s*\((?P<arguments>[^;]*)\)\s*;)")


class ExplainCase(NamedTuple):
    shader: str
    line: int               # of the access, or of the declaration no access uses
    op: str                 # "load" or "store"
    layout: str
    view: str | None
    matrix: str | None      # "RxC" of the accessed coopmat; None: explain's own shape
    snippet: str            # the shader's statements that build the layout and the view, in its order

    @property
    def id(self) -> str:
        names = self.layout + (f"/{self.view}" if self.view else "")
        return f"{self.shader}:{self.line}:{self.op}:{names}:{'matrix' if self.matrix else 'default-shape'}"


def explain_cases(shader: Path) -> list[ExplainCase]:
    """One case per tensor access of ``shader`` (its layout and view as built before it; with the coopmat's
    shape, and with explain's own), and one per layout or view no access uses (a view with the layout declared
    last before it). Specialization constants take their default values; identical cases count once."""
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), shader.read_text())
    constants, kinds, built, shapes, used, cases = [], {}, [], {}, set(), []
    layout_before: dict[str, tuple[int, str | None]] = {}

    def snippet(*names):
        return "\n".join(constants + [s for name in names for n, s in built if n == name]) + "\n"

    for m in _STATEMENT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m["const"]:
            constants.append(re.sub(r"^layout\s*\([^)]*\)\s*", "", m["const"]))
        elif m["matrix"]:
            shapes[m["matrix_name"]] = f"{m['rows']}x{m['cols']}"
        elif m["declaration"]:
            layouts = [n for n, k in kinds.items() if k == "tensorLayoutNV"]
            layout_before[m["declared"]] = (line, layouts[-1] if layouts else None)
            kinds[m["declared"]] = m["kind"]
            built.append((m["declared"], m["declaration"]))
        elif m["assignment"] and m["assigned"] in kinds:
            built.append((m["assigned"], m["assignment"]))
        elif m["access"]:
            arguments = [a.strip() for a in m["arguments"].split(",")]
            layout = arguments[3]
            view = arguments[4] if len(arguments) > 4 and kinds.get(arguments[4]) == "tensorViewNV" else None
            used |= {layout, view}
            for matrix in (shapes.get(arguments[0].split("[")[0]), None):
                cases.append(ExplainCase(shader.name, line, m["op"].lower(), layout, view, matrix,
                                         snippet(layout, view)))
    for name, kind in kinds.items():
        if name not in used:
            line, layout = layout_before[name]
            pair = (name, None) if kind == "tensorLayoutNV" else (layout, name)
            if pair[0] is not None:
                cases.append(ExplainCase(shader.name, line, "load", *pair, None, snippet(*pair)))
    unique = {}
    for case in cases:
        unique.setdefault((case.op, case.matrix, case.snippet), case)
    return list(unique.values())


#: Cases explain fails with an internal error, each marked as a strict expected failure so that its fix shows.
KNOWN_EXPLAIN_DEFECTS: dict[str, str] = {}

EXPLAIN_CASES = [case for shader in SHADERS for case in explain_cases(shader)]


def _explain_params():
    for case in EXPLAIN_CASES:
        reason = KNOWN_EXPLAIN_DEFECTS.get(case.id)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(case, id=case.id, marks=marks)


def run_explain(case: ExplainCase, directory: Path) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``vkcoop explain --json - --glsl SNIPPET`` in this process."""
    from vkcoop import cli
    glsl = directory / f"{case.shader}.{case.line}.glsl"
    glsl.write_text(case.snippet)
    argv = ["explain", "--json", "-", "--glsl", str(glsl)] + (["--store"] if case.op == "store" else [])
    argv += ["--matrix", case.matrix] if case.matrix else []
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(argv)
    return status, out.getvalue(), err.getvalue()


def internal_error(status: int, stderr: str) -> str | None:
    """What says explain failed in itself rather than explaining or refusing the input in one line."""
    if "Traceback" in stderr:
        return "a traceback"
    if status == 1:
        return f"exit status 1 (a check failed): {stderr.strip()}"
    if status not in (0, 2):
        return f"exit status {status}"
    lines = stderr.splitlines()
    if status == 2 and not (len(lines) == 1 and lines[0].startswith("vkcoop: error: ")):
        return f"a refusal that is not one error line: {stderr!r}"
    return None


def test_every_shader_with_tensor_layouts_gives_explain_cases():
    declaring = {s.name for s in SHADERS if re.search(r"\btensor(Layout|View)NV\b", s.read_text())}
    assert declaring and {case.shader for case in EXPLAIN_CASES} == declaring
    assert any(case.view for case in EXPLAIN_CASES) and any(case.op == "store" for case in EXPLAIN_CASES)


def test_the_internal_error_check_catches_an_exception_inside_explain(tmp_path, monkeypatch):
    from vkcoop.cli import explain as explain_command
    case = next(c for c in EXPLAIN_CASES if c.id not in KNOWN_EXPLAIN_DEFECTS)

    def planted_fault(request):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(explain_command, "compute", planted_fault)
    status, _, stderr = run_explain(case, tmp_path)
    assert internal_error(status, stderr) is not None


@pytest.mark.parametrize("case", list(_explain_params()))
def test_explain_takes_each_layout_and_view_of_glslang_s_shaders_without_an_internal_error(case, tmp_path):
    status, stdout, stderr = run_explain(case, tmp_path)
    problem = internal_error(status, stderr)
    assert problem is None, f"{case.id}: {problem}\n{case.snippet}"
    if status == 0:   # explained: the access asked, on the matrix asked
        explanation = json.loads(stdout)
        assert explanation["op"] == case.op
        if case.matrix:
            assert "{rows}x{cols}".format(**explanation["matrix"]) == case.matrix
