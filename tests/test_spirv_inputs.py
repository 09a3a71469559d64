"""spirv_tools on bad input: malformed modules, bad compile arguments, corrupt cache entries. Every failure is
one of the package's errors (spirv_tools.Error) that names what is wrong."""
from __future__ import annotations

import logging
import struct

import pytest

import spirv_tools
from spirv_tools import InputError, InputTypeError, SpirvFormatError, binary
from support import corrupt, toolchain_or_skip

pytestmark = pytest.mark.toolchain

PLAIN = """#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { uint data[]; };
layout(push_constant) uniform Push { uint64_t address; uint count; } push;
void main() { if (gl_GlobalInvocationID.x < push.count) data[gl_GlobalInvocationID.x] *= 3u; }
""".replace("#version 450", "#version 450\n#extension GL_EXT_shader_explicit_arithmetic_types : enable")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "spirv-cache"))


@pytest.fixture(scope="module")
def module():
    toolchain_or_skip()
    return spirv_tools.compile(PLAIN, use_cache=False)


def test_every_error_derives_from_the_package_root():
    for error in (spirv_tools.ShaderCompileError, spirv_tools.SpirvValidationError, SpirvFormatError,
                  InputError, InputTypeError):
        assert issubclass(error, spirv_tools.Error)
    assert issubclass(SpirvFormatError, ValueError) and issubclass(InputTypeError, TypeError)


# --- reflection of malformed modules ---------------------------------------------------------------------------

def test_reflect_reports_entry_points_and_push_block_size(module):
    info = spirv_tools.reflect(module)
    assert [(e.name, e.execution_model) for e in info.entry_points] == [("main", "GLCompute")]
    assert info.push_constant_size == 12  # uint64 at 0, uint at 8
    assert [(b.binding, b.kind, b.count) for b in info.bindings] == [(0, "storage-buffer", 1)]


def test_every_truncation_is_a_format_error(module):
    """Cut at every byte: at instruction boundaries (the 74-of-366 crash class), inside instructions and inside
    words. The old reflector returned ['Shader'] for module[:32]."""
    for cut in range(len(module)):
        with pytest.raises(SpirvFormatError):
            spirv_tools.reflect(module[:cut])


@pytest.mark.parametrize("grammar", ["toolchain", None], ids=["grammar", "no-grammar"])
def test_corrupted_words_give_format_errors_or_a_reflection(module, grammar):
    """Every single-word corruption either parses (it may be a different valid module) or raises
    SpirvFormatError; never IndexError, struct.error or anything else."""
    path = spirv_tools.toolchain.grammar_path() if grammar else False
    words = list(struct.unpack(f"<{len(module) // 4}I", module))
    outcomes = set()
    for index in range(len(words)):
        for value in (0, 0xFFFFFFFF, words[index] ^ 0x00010000, words[index] + 1):
            changed = struct.pack(f"<{len(words)}I", *(words[:index] + [value & 0xFFFFFFFF] + words[index + 1:]))
            try:
                spirv_tools.reflect(changed, grammar_path=path or None)
                outcomes.add("parsed")
            except SpirvFormatError:
                outcomes.add("rejected")
    assert outcomes == {"parsed", "rejected"}


def test_reflect_rejects_non_modules_with_precise_errors():
    with pytest.raises(SpirvFormatError, match="magic"):
        spirv_tools.reflect(b"\x00" * 40, grammar_path=None)
    with pytest.raises(SpirvFormatError, match="3 bytes"):
        spirv_tools.reflect(b"\x03\x02\x23", grammar_path=None)
    with pytest.raises(InputTypeError, match="spirv must be bytes, got str"):
        spirv_tools.reflect("#version 450", grammar_path=None)
    header = struct.pack("<5I", binary.MAGIC, 0x00010600, 0, 10, 0)
    with pytest.raises(SpirvFormatError, match="OpMemoryModel"):
        spirv_tools.reflect(header, grammar_path=None)
    with pytest.raises(SpirvFormatError, match="version word"):
        spirv_tools.reflect(struct.pack("<5I", binary.MAGIC, 0x00020000, 0, 10, 0), grammar_path=None)


# --- compile arguments ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, message", [
    ({"source": b"#version 450\nvoid main() {}"}, InputTypeError, "source must be a str of GLSL, got bytes"),
    ({"source": PLAIN, "name": "/"}, InputError, "name '/' is not a file name"),
    ({"source": "  \n"}, InputError, "the source is empty"),
    ({"source": PLAIN, "entry": "nomain"}, InputError, "entry 'nomain' is not an entry point"),
    ({"source": PLAIN, "entry": "1x"}, InputError, "entry must be an identifier"),
    ({"source": PLAIN, "defines": {"FOO": "1;\n#error injected"}}, InputError, "must be a single line"),
    ({"source": PLAIN, "defines": {"FOO": "1 \\"}}, InputError, "trailing backslash"),
    ({"source": PLAIN, "defines": {"FOO=3 ": None}}, InputError, "macro name 'FOO=3 ' is not an identifier"),
    ({"source": PLAIN, "defines": {"A B": 1}}, InputError, "macro name 'A B' is not an identifier"),
    ({"source": PLAIN, "defines": {"A": [1]}}, InputTypeError, r"defines\['A'\] must be a str, number"),
    ({"source": PLAIN, "defines": ["A"]}, InputTypeError, "defines must be a dict"),
    ({"source": PLAIN, "include_dirs": "inc"}, InputTypeError, "include_dirs must be a list"),
    ({"source": PLAIN, "stage": "compute shader"}, InputError, "stage 'compute shader'"),
    ({"path": "/nonexistent/x.comp"}, InputError, "is not a file"),
    ({"path": 3}, InputTypeError, "path must be a str or os.PathLike"),
])
def test_bad_compile_arguments_name_the_argument(kwargs, error, message):
    toolchain_or_skip()
    with pytest.raises(error, match=message):
        spirv_tools.compile(**kwargs)


def test_an_error_without_a_line_keeps_one_file_prefix():
    err = spirv_tools.parse_compile_error(
        "shader.comp: error: #version: compute shaders require es profile with version 310\n1 error generated.\n",
        "shader.comp")
    assert err.file == "shader.comp" and err.line is None
    assert str(err).startswith("shader.comp: #version: compute shaders")


def test_validate_refuses_non_modules_before_running_spirv_val():
    with pytest.raises(InputTypeError):
        spirv_tools.validate("not bytes")
    with pytest.raises(SpirvFormatError):
        spirv_tools.validate(b"\x00" * 8)


# --- the SPIR-V cache checks itself ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["empty", "truncated", "bit-flipped"])
def test_a_corrupt_cache_entry_is_logged_dropped_and_rebuilt(tmp_path, caplog, kind):
    toolchain_or_skip()
    first = spirv_tools.compile(PLAIN, name="cached.comp")
    (entry,) = (tmp_path / "spirv-cache").glob("*.spvc")
    entry.write_bytes(corrupt(kind, entry.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="spirv_tools.cache"):
        again = spirv_tools.compile(PLAIN, name="cached.comp")
    assert again == first
    assert [r.getMessage() for r in caplog.records if "dropping corrupt cache entry" in r.getMessage()], \
        caplog.text
    assert spirv_tools.compile(PLAIN, name="cached.comp") == first  # the rebuilt entry is good


def test_an_intact_entry_with_a_bad_payload_is_rejected_by_the_magic_check(tmp_path):
    from spirv_tools import cache, compiler
    path = tmp_path / "x.spvc"
    cache.write_entry(path, b"\x00" * 32)
    assert cache.read_entry(path, check=compiler._spirv_problem) is None
    assert not path.exists()
