"""spirv_tools: toolchain search, compile (both backends), errors, cache, validate, reflect."""
from __future__ import annotations

import dataclasses
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import spirv_tools
from spirv_tools import compiler, toolchain
from spirv_tools.shaderc import ShadercLibrary

REPO = Path(__file__).resolve().parent.parent


def _capable_toolchain():
    try:
        return spirv_tools.find_toolchain()
    except spirv_tools.ToolchainError as exc:
        return exc


_TC = _capable_toolchain()
needs_toolchain = pytest.mark.skipif(isinstance(_TC, Exception),
                                     reason=f"no coopmat2-capable shader toolchain: {_TC}")
pytestmark = pytest.mark.toolchain

PLAIN_SHADER = """#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { uint data[]; };
void main() { data[gl_GlobalInvocationID.x] *= 3u; }
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "spirv-cache"))


@needs_toolchain
def test_load_store_reflects_tensor_addressing():
    spirv = spirv_tools.compile(path=REPO / "shaders/tensor/load_store.comp")
    spirv_tools.validate(spirv)
    info = spirv_tools.reflect(spirv)
    assert {"CooperativeMatrixTensorAddressingNV", "TensorAddressingNV"} <= set(info.capabilities)
    assert {"OpCooperativeMatrixLoadTensorNV", "OpCooperativeMatrixStoreTensorNV"} <= info.opcodes
    assert "SPV_NV_tensor_addressing" in info.extensions
    assert info.entry_point == "main" and info.execution_model == "GLCompute"
    assert info.local_size == (32, 1, 1)
    assert [(s.spec_id, s.name, s.type, s.default) for s in info.spec_constants] == [
        (0, "ROWS", "uint32", 16), (1, "COLS", "uint32", 16), (2, "ROW_STRIDE", "uint32", 0)]
    assert [(b.set, b.binding, b.storage_class) for b in info.bindings] == [
        (0, 0, "StorageBuffer"), (0, 1, "StorageBuffer")]
    assert info.push_constant_blocks


@needs_toolchain
def test_compile_error_names_file_and_line():
    broken = PLAIN_SHADER.replace("void main() {", "void main() {\n    undeclared_thing = 1;")
    with pytest.raises(spirv_tools.ShaderCompileError) as info:
        spirv_tools.compile(broken, name="broken.comp")
    err = info.value
    assert err.file == "broken.comp"
    assert err.line == 5
    assert "undeclared_thing" in err.message
    assert "broken.comp:5" in str(err)


@needs_toolchain
def test_compile_error_inside_an_include_points_at_the_include(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "helpers.glsl").write_text("uint helper(uint x) {\n    return x + ;\n}\n")
    (tmp_path / "main.comp").write_text(
        "#version 450\n#extension GL_GOOGLE_include_directive : enable\n#include \"helpers.glsl\"\n"
        "layout(local_size_x = 1) in;\nvoid main() {}\n")
    with pytest.raises(spirv_tools.ShaderCompileError) as info:
        spirv_tools.compile(path=tmp_path / "main.comp", include_dirs=[inc])
    assert info.value.file.endswith("helpers.glsl")
    assert info.value.line == 2


@needs_toolchain
def test_defines_and_include_dirs_change_the_module(tmp_path):
    (tmp_path / "scale.glsl").write_text("const uint SCALE = SCALE_VALUE;\n")
    src = ("#version 450\n#extension GL_GOOGLE_include_directive : enable\n#include <scale.glsl>\n"
           "layout(local_size_x = 1) in;\nlayout(set=0, binding=0) buffer D { uint d[]; };\n"
           "void main() { d[0] = SCALE; }\n")
    two = spirv_tools.compile(src, defines={"SCALE_VALUE": 2}, include_dirs=[tmp_path])
    three = spirv_tools.compile(src, defines={"SCALE_VALUE": 3}, include_dirs=[tmp_path])
    assert two != three
    with pytest.raises(spirv_tools.ShaderCompileError):
        spirv_tools.compile(src, defines={"SCALE_VALUE": 2})  # include not found without the dir


@needs_toolchain
def test_cache_hits_and_is_invalidated_by_an_include_change(tmp_path, monkeypatch):
    cache = tmp_path / "spirv-cache"
    (tmp_path / "value.glsl").write_text("const uint VALUE = 7u;\n")
    src = ("#version 450\n#extension GL_GOOGLE_include_directive : enable\n#include \"value.glsl\"\n"
           "layout(local_size_x = 1) in;\nlayout(set=0, binding=0) buffer D { uint d[]; };\n"
           "void main() { d[0] = VALUE; }\n")
    first = spirv_tools.compile(src, name=str(tmp_path / "v.comp"))
    assert len(list(cache.glob("*.spvc"))) == 1
    calls = []
    monkeypatch.setattr(compiler, "_compile_with_glslc", lambda *a, **k: calls.append(a) or b"")
    assert spirv_tools.compile(src, name=str(tmp_path / "v.comp")) == first
    assert calls == []  # served from the cache
    (tmp_path / "value.glsl").write_text("const uint VALUE = 8u;\n")
    monkeypatch.undo()
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(cache))
    second = spirv_tools.compile(src, name=str(tmp_path / "v.comp"))
    assert second != first
    assert len(list(cache.glob("*.spvc"))) == 2


@needs_toolchain
def test_the_same_shader_from_another_checkout_is_served_from_the_cache(tmp_path, monkeypatch):
    """The key holds what decides the SPIR-V (source, includes by name and text, defines, tool versions), not
    where the checkout lies: a second clone finds its shaders built."""
    src = ("#version 450\n#extension GL_GOOGLE_include_directive : enable\n#include \"value.glsl\"\n"
           "layout(local_size_x = 1) in;\nlayout(set=0, binding=0) buffer D { uint d[]; };\n"
           "void main() { d[0] = VALUE; }\n")
    built = {}
    for checkout in ("one", "two"):
        (tmp_path / checkout / "include").mkdir(parents=True)
        (tmp_path / checkout / "include" / "value.glsl").write_text("const uint VALUE = 7u;\n")
        (tmp_path / checkout / "v.comp").write_text(src)
        built[checkout] = spirv_tools.compile(path=tmp_path / checkout / "v.comp",
                                              include_dirs=[tmp_path / checkout / "include"])
        real = compiler.backend()   # the second checkout's compile must come from the cache, whatever the backend
        monkeypatch.setattr(compiler, "backend", lambda: dataclasses.replace(real, library=None))
        monkeypatch.setattr(compiler, "_compile_with_glslc", lambda *a, **k: pytest.fail("compiled again"))
    assert built["one"] == built["two"]
    assert len(list((tmp_path / "spirv-cache").glob("*.spvc"))) == 1


def test_the_backend_s_key_names_its_versions_and_its_place_only_without_them():
    from spirv_tools.toolchain import Toolchain
    versioned = Toolchain("private", Path("/one/usr/bin"), versions={"shaderc": "2026.4", "glslang": "16.4.0"})
    moved = Toolchain("private", Path("/two/usr/bin"), versions={"shaderc": "2026.4", "glslang": "16.4.0"})
    unknown = Toolchain("private", Path("/one/usr/bin"), versions={"shaderc": "unavailable: no glslc"})
    key = compiler._identity("glslc", versioned, versioned.describe(), ("shaderc", "glslang"))
    assert key == compiler._identity("glslc", moved, moved.describe(), ("shaderc", "glslang")) == \
        "glslc:2026.4:16.4.0"
    assert "/one/usr/bin" in compiler._identity("glslc", unknown, unknown.describe(), ("shaderc", "glslang"))
    assert compiler._identity("libshaderc", versioned, "/one/lib.so", ("shaderc",)) == "libshaderc:2026.4"


@needs_toolchain
def test_validate_rejects_a_broken_module():
    spirv = bytearray(spirv_tools.compile(PLAIN_SHADER))
    # Drop the OpMemoryModel instruction (mandatory): the module stays parseable but is invalid.
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if opcode == 14:  # OpMemoryModel
            del words[i:i + count]
            break
        i += count
    with pytest.raises(spirv_tools.SpirvValidationError, match="memory model"):
        spirv_tools.validate(struct.pack(f"<{len(words)}I", *words))


@needs_toolchain
def test_disassemble_shows_tensor_opcodes():
    text = spirv_tools.disassemble(spirv_tools.compile(path=REPO / "shaders/tensor/load_store.comp"))
    assert "OpCooperativeMatrixLoadTensorNV" in text and "OpTensorLayoutSliceNV" in text


@needs_toolchain
def test_reflect_local_size_id_and_typed_spec_constants():
    src = """#version 450
layout(local_size_x_id = 3, local_size_y = 2) in;
layout(constant_id = 3) const uint WIDTH = 64;
layout(constant_id = 4) const int OFFSET = -5;
layout(constant_id = 5) const float SCALE = 0.5;
layout(constant_id = 6) const bool FLAG = true;
layout(set = 1, binding = 2) buffer D { float d[]; } data_block;
layout(push_constant) uniform P { uint n; } pc;
void main() { if (FLAG) data_block.d[gl_LocalInvocationID.x + OFFSET] = SCALE * float(pc.n); }
"""
    info = spirv_tools.reflect(spirv_tools.compile(src))
    # glslang gives the LocalSizeId x constant its own default (1); the runtime specializes id 3.
    assert info.local_size == (1, 2, 1)
    assert info.local_size_spec_ids == (3, None, None)
    assert info.uses_local_size_id  # SPIR-V 1.6: OpExecutionModeId LocalSizeId
    assert [(s.spec_id, s.type, s.default) for s in info.spec_constants] == [
        (3, "uint32", 64), (4, "int32", -5), (5, "float32", 0.5), (6, "bool", True)]
    assert [(b.set, b.binding, b.name) for b in info.bindings] == [(1, 2, "data_block")]
    assert info.push_constant_blocks == ["pc"]


def test_compile_error_parser_without_a_line():
    err = spirv_tools.parse_compile_error("glslc: error: linking failed\n", "x.comp")
    assert err.file == "x.comp" and err.line is None and "linking failed" in err.message


# --- the in-process cffi binding --------------------------------------------------------------------------
# On Debian 12 the private libshaderc needs glibc 2.38, so the binding is proven in a Python process started
# through the private prefix's own dynamic loader; the GPU host (glibc 2.39) loads it directly.

BINDING_CHECK = """
import sys
from pathlib import Path
from spirv_tools.shaderc import ShadercLibrary
library = ShadercLibrary(sys.argv[1])
source = Path(sys.argv[2])
ok, spirv, log = library.compile(source.read_text(), name=str(source), defines={"ELEMENT_TYPE": "float"})
assert ok, log
Path(sys.argv[3]).write_bytes(spirv)
ok, spirv, log = library.compile("#version 450\\nlayout(local_size_x = 1) in;\\nvoid main() { nope = 1; }\\n",
                                 name="bad.comp")
assert not ok and spirv == b""
print(log)
"""


def _private_or_skip():
    if isinstance(_TC, Exception) or _TC.name != "private" or _TC.libshaderc is None:
        pytest.skip("needs the private toolchain prefix (vkcoop toolchain install)")
    return _TC


def _python_that_loads(tc) -> list[str]:
    """argv prefix for a Python that can dlopen the prefix's libshaderc."""
    try:
        ShadercLibrary(tc.libshaderc).close()
        return [sys.executable]
    except OSError:
        return [str(tc.loader), "--library-path", str(tc.library_path), sys.executable]


def test_cffi_binding_matches_glslc_byte_for_byte(tmp_path):
    tc = _private_or_skip()
    shader = REPO / "shaders/tensor/load_store.comp"
    out = tmp_path / "binding.spv"
    proc = subprocess.run([*_python_that_loads(tc), "-c", BINDING_CHECK, str(tc.libshaderc), str(shader), str(out)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "bad.comp:3: error" in proc.stdout and "nope" in proc.stdout
    via_glslc = tmp_path / "glslc.spv"
    tc.run("glslc", ["--target-env=vulkan1.3", "-fshader-stage=compute", "-DELEMENT_TYPE=float", str(shader),
                     "-o", str(via_glslc)], check=True)
    assert out.read_bytes() == via_glslc.read_bytes()


def test_a_libshaderc_that_cannot_load_or_compile_coopmat2_is_rejected():
    candidates = [Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libshaderc.so.1",
                                    "/usr/lib/x86_64-linux-gnu/libshaderc_shared.so.1") if Path(p).exists()]
    if not candidates:
        pytest.skip("no distribution libshaderc installed")
    library, reason = compiler.try_load_shaderc(candidates[0])
    if library is not None:
        pytest.skip(f"{candidates[0]} can compile coopmat2; nothing to reject")
    assert str(candidates[0]) in reason
    assert "does not load" in reason or "cannot compile GL_NV_cooperative_matrix2" in reason


def test_missing_libshaderc_is_rejected_with_a_reason():
    library, reason = compiler.try_load_shaderc(None)
    assert library is None and "no libshaderc" in reason


# --- the toolchain search --------------------------------------------------------------------------------

def test_survey_explains_rejections():
    for cand in toolchain.survey():
        assert cand.capable == (cand.reason == "ok")
        if not cand.capable:
            assert cand.reason  # says why, e.g. the compiler's first error


def test_no_toolchain_error_lists_the_install_command(monkeypatch):
    monkeypatch.setattr(toolchain, "candidates", lambda: [])
    toolchain.find_toolchain.cache_clear()
    try:
        with pytest.raises(spirv_tools.ToolchainMissingError, match="vkcoop toolchain install") as exc:
            toolchain.find_toolchain()
        assert "\n" not in str(exc.value)
    finally:
        toolchain.find_toolchain.cache_clear()


# The private prefix's signatures, mirror, lock file and install: tests/test_toolchain*.py.


@needs_toolchain
def test_private_prefix_runs_through_its_own_loader():
    tc = _TC
    if tc.name != "private":
        pytest.skip(f"the chosen toolchain is {tc.name}, not the private prefix")
    argv = tc.tool("glslc")
    assert argv[0].endswith("ld-linux-x86-64.so.2") and argv[1] == "--library-path"
    # A numeric compare: "9.0" >= "15" holds for strings, and "100" < "15" (the weak test this replaced).
    major = int(tc.versions.get("glslang", "0").split(".")[0])
    assert major >= 15, tc.versions


@needs_toolchain
def test_reflect_literal_local_size_has_no_spec_ids_even_when_gl_workgroupsize_is_used():
    src = """#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer D { uint d[]; };
void main() { d[gl_LocalInvocationID.x] = gl_WorkGroupSize.x; }
"""
    info = spirv_tools.reflect(spirv_tools.compile(src))
    assert info.local_size == (64, 1, 1)
    assert info.local_size_spec_ids is None and not info.uses_local_size_id
