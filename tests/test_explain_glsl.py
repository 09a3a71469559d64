"""vkcoop.tensor.glsl: generated GLSL parses back to the same state (any valid state, and the CLI's
--glsl-out), the built-ins follow GL_NV_cooperative_matrix2's defaults, and each malformed snippet gets an
error that names its line and column."""
from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings, strategies as st

from support import toolchain_or_skip
from vkcoop.cli import explain as explain_command
from vkcoop.tensor import ClampMode, TensorLayout, TensorView
from vkcoop.tensor.glsl import GlslError, parse, to_glsl

U32 = st.one_of(st.integers(0, 9), st.integers(0, 2**32 - 1))
I32 = st.one_of(st.integers(-9, 9), st.integers(-2**31, 2**31 - 1))


@st.composite
def any_layout(draw):
    """Any valid layout state, set field by field (not only what a few builder calls make)."""
    d = draw(st.integers(1, 5))
    vec = lambda s: tuple(draw(s) for _ in range(d))  # noqa: E731
    return TensorLayout(d, draw(st.sampled_from(list(ClampMode))), vec(st.integers(1, 2**32 - 1) | st.integers(1, 4)),
                        vec(U32), vec(U32), vec(I32), vec(U32), draw(U32))


@st.composite
def any_view(draw):
    d = draw(st.integers(1, 5))
    vec = lambda s: tuple(draw(s) for _ in range(d))  # noqa: E731
    clip = st.one_of(U32, st.just(2**32 - 1))
    return TensorView(d, draw(st.booleans()), tuple(draw(st.permutations(range(d)))), vec(U32), vec(U32),
                      draw(clip), draw(clip), draw(clip), draw(clip))


@settings(max_examples=300, deadline=None)
@given(any_layout(), st.none() | any_view())
def test_parse_round_trips_generated_glsl_for_any_state(layout, view):
    program = parse(to_glsl(layout, view))
    assert program.layout == layout and program.view == view
    assert (program.layout_name, program.view_name) == ("t", None if view is None else "v")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_glsl_out_of_the_option_form_parses_to_the_layout_the_builders_make(data):
    n = data.draw(st.integers(1, 4))
    ints = lambda lo, hi, k=n: [data.draw(st.integers(lo, hi)) for _ in range(k)]  # noqa: E731
    mode = data.draw(st.sampled_from(list(ClampMode)))
    block, dims, slice_ = ints(1, 3), ints(1, 9), ints(-5, 9, 2 * n)
    slice_[1::2] = [max(1, s) for s in slice_[1::2]]
    perm, clip = data.draw(st.permutations(range(n))), ints(0, 5, 4)
    argv = ["--dims", ",".join(map(str, dims)), "--clamp", mode.name, "--block", ",".join(map(str, block)),
            "--slice", ",".join(map(str, slice_)), "--clamp-value", "0xB800", "--view-perm",
            ",".join(map(str, perm)), "--clip", ",".join(map(str, clip)), "--glsl-out"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert explain_command.main(argv) == 0
    t = (TensorLayout.create(n, mode).set_block_size(block).set_dimension(dims)
         .slice(slice_[0::2], slice_[1::2]).set_clamp_value(0xB800))
    v = TensorView.create(n, False, perm).set_clip(*clip)
    program = parse(out.getvalue())
    assert (program.layout, program.view) == (t, v)


def test_builtins_follow_the_glsl_defaults_and_bare_calls():
    program = parse("""
        const uint rows = 6;   // names assigned earlier may be used
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeRepeatNV);  /* bare: makes t */
        setTensorLayoutDimensionNV(t, rows, 0x8u);
        t = sliceTensorLayoutNV(t, 2, 4u, -1, 6u);
        tensorViewNV<3, true, 0> w = createTensorViewNV(3, true, 0);   // p1, p2 default to 1, 2
    """)
    t = TensorLayout.create(2, ClampMode.Repeat).set_dimension(6, 8).slice((2, -1), (4, 6))
    assert program.layout == t and program.view == TensorView.create(3, True, (0, 1, 2))
    assert program.view_name == "w" and program.names["rows"] == 6
    assert parse("t = createTensorLayoutNV(1); t = setTensorLayoutDimensionNV(t, 5);").layout.clamp_mode \
        == ClampMode.Undefined


MALFORMED = [
    # (snippet, line, column, words the message must contain)
    ("t = createTensorLayoutNV(2);\nt = setTensorLayoutDimensionsNV(t, 4, 4);", 2, 5,
     ["unknown function", "setTensorLayoutDimensionsNV"]),
    ("t = createTensorLayoutNV(2);\n  t = setTensorLayoutDimensionNV(t, 4);", 2, 7,
     ["takes 3 arguments", "got 2"]),
    ("t = createTensorLayoutNV(2);\nt = sliceTensorLayoutNV(t, 0, 4, 0);", 2, 5, ["takes 5 arguments"]),
    ("t = createTensorLayoutNV(1);\nv = createTensorViewNV(1, false, 0, 0);", 2, 5, ["1..3 arguments"]),
    ("t = createTensorLayoutNV(2);\nt = setTensorLayoutDimensionNV(t, n, 4);", 2, 35,
     ["'n'", "not a previously assigned name"]),
    ("t = createTensorLayoutNV(2);\nt = setTensorLayoutDimensionNV(t, 4 * 2, 4);", 2, 37, ["'*'"]),
    ("t = createTensorLayoutNV(2);\nt = setTensorLayoutDimensionNV(t, 4.0, 4);", 2, 35,
     ["'4.0'", "not an integer literal"]),
    ("t = createTensorLayoutNV(6);", 1, 26, ["Dim 6", "1..5"]),
    ("v = createTensorViewNV(0);", 1, 24, ["Dim 0", "1..5"]),
    ("t = createTensorLayoutNV(2, 9);", 1, 29, ["Mode"]),
    ("t = createTensorLayoutNV(2);\nt = setTensorLayoutBlockSizeNV(t, 0, 1);", 2, 5, ["block_size"]),
    ("tensorLayoutNV<3> t = createTensorLayoutNV(2);", 1, 1, ["declared tensorLayoutNV<3>"]),
    ("t = createTensorLayoutNV(2)", 1, 28, ["expected ';'"]),
    ("float x = 1;", 1, 1, ["unknown type or function 'float'"]),
    ("uint n = 4;", 1, 12, ["builds no tensor layout"]),
    ("layout(local_size_x = 1) const uint n = 1;", 1, 8, ["'constant_id'", "'local_size_x'"]),
    ("layout(constant_id = 0) uint n = 1;", 1, 25, ["'const'", "found 'uint'"]),
    # A clamp-mode constant is an int, never a bool: hasDimensions still needs true or false.
    ("v = createTensorViewNV(2, gl_CooperativeMatrixClampModeConstantNV);", 1, 27, ["hasDimensions"]),
]


@pytest.mark.parametrize("snippet, line, column, words", MALFORMED)
def test_malformed_snippets_name_the_line_and_column(snippet, line, column, words):
    with pytest.raises(GlslError) as caught:
        parse(snippet)
    error = caught.value
    assert (error.line, error.column) == (line, column), str(error)
    assert str(error).startswith(f"line {line}, column {column}: ")
    for word in words:
        assert word in error.message


# The clamp-mode constants are GLSL `const int`s (GL_NV_cooperative_matrix2: ConstantNV = 1, ClampToEdgeNV = 2,
# MirrorRepeatNV = 4), so glslang takes them, directly or through a specialization constant, as a Dim or a
# dimension; glslang's own coopmat2 tests use them so.
CLAMP_MODES_AS_INTEGERS = """
layout(constant_id = 0) const uint32_t Clamp = gl_CooperativeMatrixClampModeConstantNV;
tensorLayoutNV<Clamp, 2> t = createTensorLayoutNV(Clamp, gl_CooperativeMatrixClampModeClampToEdgeNV);
t = setTensorLayoutDimensionNV(t, gl_CooperativeMatrixClampModeMirrorRepeatNV);
tensorViewNV<Clamp, true> v = createTensorViewNV(Clamp, true);
v = setTensorViewDimensionsNV(v, Clamp);
tensorLayoutNV<2, Clamp> tc = createTensorLayoutNV(2, Clamp);
"""


def test_clamp_mode_constants_are_integers_where_glslang_takes_them():
    program = parse(CLAMP_MODES_AS_INTEGERS)
    t, v, tc = program.names["t"], program.view, program.names["tc"]
    assert (t.dim, t.clamp_mode, t.layout_dimension) == (1, ClampMode.ClampToEdge, (4,))
    assert (v.dim, v.has_dimensions, v.view_dimension) == (1, True, (1,))
    assert (tc.dim, tc.clamp_mode) == (2, ClampMode.Constant) and program.names["Clamp"] == 1
    # What they build is ordinary state: the generated GLSL spells the integers out.
    assert "setTensorLayoutDimensionNV(t, 4u);" in to_glsl(t)


@pytest.mark.toolchain
def test_the_clamp_mode_snippet_compiles_with_the_shader_toolchain():
    """The snippet above is GLSL that glslang accepts (not only what this parser accepts)."""
    spirv_tools = toolchain_or_skip()
    head, body = CLAMP_MODES_AS_INTEGERS.strip().split("\n", 1)
    source = ("#version 450\n#extension GL_EXT_shader_explicit_arithmetic_types : enable\n"
              "#extension GL_KHR_cooperative_matrix : enable\n#extension GL_NV_cooperative_matrix2 : enable\n"
              f"layout(local_size_x = 32) in;\n{head}\nvoid main() {{\n{body}}}\n")
    assert len(spirv_tools.compile(source, name="clamp_modes_as_integers.comp")) > 100


@pytest.mark.toolchain
def test_generated_glsl_compiles_with_the_shader_toolchain():
    spirv_tools = toolchain_or_skip()
    t = (TensorLayout.create(3, ClampMode.RepeatMirrored).set_block_size(1, 2, 2).set_dimension(5, 6, 8)
         .set_stride(100, 9, 1).slice((-1, 2, 0), (4, 4, 8)).set_clamp_value(0x3C00))
    v = TensorView.create(3, True, (2, 0, 1)).set_dimensions(2, 2, 8).set_stride(64, 8, 1).set_clip(1, 3, 0, 8)
    source = ("#version 450\n#include \"vkcoop/common.glsl\"\nlayout(local_size_x = 32) in;\n"
              "layout(binding = 0) buffer B { float16_t data[]; };\nvoid main() {\n"
              + to_glsl(t, v) + "coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m;\n"
              "coopMatLoadTensorNV(m, data, 0, t, v);\n}\n")
    from vkcoop.paths import shader_root
    spirv = spirv_tools.compile(source, include_dirs=[shader_root() / "include"], name="explain_glsl.comp")
    assert len(spirv) > 100
