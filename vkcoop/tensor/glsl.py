"""GLSL snippets of the tensor layout and view built-ins: parse them into state, and generate them from state.

Spec: GL_NV_cooperative_matrix2 section 4.1.X "Tensor Layout Types", which declares (N = the layout's or
view's Dim)::

    createTensorLayoutNV(Dim, Mode = gl_CooperativeMatrixClampModeUndefinedNV)
    setTensorLayoutBlockSizeNV(t, blockSize0, ..., blockSize<N-1>)
    setTensorLayoutDimensionNV(t, dim0, ..., dim<N-1>)
    setTensorLayoutStrideNV(t, s0, ..., s<N-1>)
    sliceTensorLayoutNV(t, offset0, span0, ..., offset<N-1>, span<N-1>)
    setTensorLayoutClampValueNV(t, value)
    createTensorViewNV(Dim, hasDimensions = false, p0 = 0, ..., p<Dim-1> = Dim-1)
    setTensorViewDimensionsNV(v, dim0, ..., dim<N-1>)
    setTensorViewStrideNV(v, s0, ..., s<N-1>)
    setTensorViewClipNV(v, clipRowOffset, clipRowSpan, clipColOffset, clipColSpan)

:func:`parse` accepts statements made of exactly these calls, whose arguments are integer literals (decimal
or hex, optional ``u`` suffix, optional minus), ``true``/``false``, the ``gl_CooperativeMatrixClampMode*NV``
constants (GLSL ``const int`` values: glslang takes them wherever an integer goes, a Dim or a dimension too), names
assigned earlier in the snippet, and nested built-in calls. Statements are
``[layout(constant_id = N)] [const] type name = expr;`` (a specialization constant is taken at its default),
``name = expr;`` or a bare call ``f(x, ...);``, which is shorthand for
``x = f(x, ...);`` (a bare create names its result ``t`` for a layout, ``v`` for a view). ``//`` and
``/* */`` comments are skipped. Anything else is a :class:`GlslError` naming the line and column.

:func:`to_glsl` writes the calls that build a given layout (and view) state exactly; ``parse(to_glsl(t, v))``
gives back ``(t, v)`` for every valid state.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .state import (MAX_DIM, UINT32_MAX, ClampMode, TensorLayout, TensorSpecError, TensorView,
                    createTensorLayoutNV, createTensorViewNV, setTensorLayoutBlockSizeNV,
                    setTensorLayoutClampValueNV, setTensorLayoutDimensionNV, setTensorLayoutStrideNV,
                    setTensorViewClipNV, setTensorViewDimensionsNV, setTensorViewStrideNV, sliceTensorLayoutNV)

#: GLSL spelling of each clamp mode (GL_NV_cooperative_matrix2 calls mode 4 MirrorRepeat).
MODE_NAMES = {ClampMode.Undefined: "gl_CooperativeMatrixClampModeUndefinedNV",
              ClampMode.Constant: "gl_CooperativeMatrixClampModeConstantNV",
              ClampMode.ClampToEdge: "gl_CooperativeMatrixClampModeClampToEdgeNV",
              ClampMode.Repeat: "gl_CooperativeMatrixClampModeRepeatNV",
              ClampMode.RepeatMirrored: "gl_CooperativeMatrixClampModeMirrorRepeatNV"}
CONSTANTS = {name: mode for mode, name in MODE_NAMES.items()} | {"true": True, "false": False}
SCALAR_TYPES = ("int", "uint", "int32_t", "uint32_t", "bool")
TENSOR_TYPES = ("tensorLayoutNV", "tensorViewNV")

# name -> (builder, the names of the arguments after the first one, given the first one's Dim)
_LAYOUT_BUILDERS = {
    "setTensorLayoutBlockSizeNV": (setTensorLayoutBlockSizeNV, lambda n: [f"blockSize{i}" for i in range(n)]),
    "setTensorLayoutDimensionNV": (setTensorLayoutDimensionNV, lambda n: [f"dim{i}" for i in range(n)]),
    "setTensorLayoutStrideNV": (setTensorLayoutStrideNV, lambda n: [f"s{i}" for i in range(n)]),
    "sliceTensorLayoutNV": (sliceTensorLayoutNV, lambda n: [f"{a}{i}" for i in range(n) for a in ("offset", "span")]),
    "setTensorLayoutClampValueNV": (setTensorLayoutClampValueNV, lambda n: ["value"]),
}
_VIEW_BUILDERS = {
    "setTensorViewDimensionsNV": (setTensorViewDimensionsNV, lambda n: [f"dim{i}" for i in range(n)]),
    "setTensorViewStrideNV": (setTensorViewStrideNV, lambda n: [f"s{i}" for i in range(n)]),
    "setTensorViewClipNV": (setTensorViewClipNV,
                            lambda n: ["clipRowOffset", "clipRowSpan", "clipColOffset", "clipColSpan"]),
}
BUILTINS = ("createTensorLayoutNV", "createTensorViewNV", *_LAYOUT_BUILDERS, *_VIEW_BUILDERS)


class GlslError(ValueError):
    """A snippet :func:`parse` does not accept; ``line`` and ``column`` (1-based) point at the cause."""

    def __init__(self, message: str, line: int, column: int):
        super().__init__(f"line {line}, column {column}: {message}")
        self.message, self.line, self.column = message, line, column


class GlslProgram(NamedTuple):
    """What a snippet builds: the last layout and the last view assigned (``view`` None when there is none),
    their names, and every name the snippet assigned."""
    layout: TensorLayout
    view: TensorView | None
    layout_name: str
    view_name: str | None
    names: dict


class _Token(NamedTuple):
    kind: str      # "number", "name", "punct", "end"
    text: str
    line: int
    column: int


_TOKEN = re.compile(r"(?P<space>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)"
                    r"|(?P<number>\d[\w.]*)|(?P<name>[A-Za-z_]\w*)|(?P<punct>.)", re.S)


def _tokens(text: str) -> list[_Token]:
    out = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind in ("space", "comment"):
            continue
        start = match.start()
        line = text.count("\n", 0, start) + 1
        column = start - (text.rfind("\n", 0, start) + 1) + 1
        if kind == "punct" and match.group() == "/" and text.startswith("/*", start):
            raise GlslError("unterminated /* comment", line, column)
        out.append(_Token(kind, match.group(), line, column))
    line = text.count("\n") + 1
    out.append(_Token("end", "end of input", line, len(text) - (text.rfind("\n") + 1) + 1))
    return out


def _int_literal(token: _Token) -> int:
    """A GLSL integer literal: decimal, 0x hex or 0 octal, with an optional u/U suffix."""
    text = token.text[:-1] if token.text[-1:] in "uU" else token.text
    try:
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
            return int(text, 16)
        if re.fullmatch(r"0[0-7]*", text):
            return int(text, 8)
        if re.fullmatch(r"[1-9]\d*", text):
            return int(text)
    except ValueError:
        pass
    raise GlslError(f"{token.text!r} is not an integer literal (only integer literals and previously "
                    f"assigned names are supported)", token.line, token.column)


class _Parser:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.pos = 0
        self.names: dict = {}
        self.declared: dict = {}    # tensor variable -> (kind, template values, token) from its declaration
        self.last = {"layout": None, "view": None}

    # -- tokens ------------------------------------------------------------------------------------------
    @property
    def token(self) -> _Token:
        return self.tokens[self.pos]

    def peek(self, k: int = 1) -> _Token:
        return self.tokens[min(self.pos + k, len(self.tokens) - 1)]

    def take(self) -> _Token:
        token = self.token
        self.pos += 1
        return token

    def expect(self, text: str, what: str) -> _Token:
        if self.token.text != text:
            raise GlslError(f"expected {text!r} {what}, found {self.token.text!r}", self.token.line,
                            self.token.column)
        return self.take()

    # -- statements --------------------------------------------------------------------------------------
    def program(self) -> GlslProgram:
        while self.token.kind != "end":
            self.statement()
        if self.last["layout"] is None:
            raise GlslError("the snippet builds no tensor layout; start with createTensorLayoutNV(Dim, Mode)",
                            self.token.line, self.token.column)
        layout_name, view_name = self.last["layout"], self.last["view"]
        return GlslProgram(self.names[layout_name], None if view_name is None else self.names[view_name],
                           layout_name, view_name, dict(self.names))

    def statement(self) -> None:
        first = self.token
        if first.kind != "name":
            raise GlslError(f"expected a statement (a declaration, an assignment or a built-in call), found "
                            f"{first.text!r}", first.line, first.column)
        if first.text == "layout" and self.peek().text == "(":
            self._specialization_qualifier()
            target, value = self.declaration()
        elif self.peek().text == "(":
            target = self._bare_target(first)
            value = self.expression()
        elif self.peek().text == "=":
            target = self.take().text
            self.take()
            value = self.expression()
        else:
            target, value = self.declaration()
        self.expect(";", "at the end of the statement")
        self.assign(target, value, first)

    def _bare_target(self, call: _Token) -> str:
        """The variable a bare call ``f(x, ...);`` updates: x for a builder, t / v for a create."""
        if call.text == "createTensorLayoutNV":
            return "t"
        if call.text == "createTensorViewNV":
            return "v"
        first, after = self.peek(2), self.peek(3)
        if call.text in BUILTINS and not (first.kind == "name" and after.text in (",", ")")):
            raise GlslError(f"a bare {call.text}(...) call must name its variable as the first argument; or "
                            f"assign the result: x = {call.text}(...);", first.line, first.column)
        return first.text

    def _specialization_qualifier(self) -> None:
        """``layout(constant_id = N) const``: a specialization constant, taken at its default value."""
        for text, what in (("layout", ""), ("(", "after layout"), ("constant_id", "(the only layout qualifier "
                           "understood here)"), ("=", "after constant_id")):
            self.expect(text, what)
        _int_literal(self.take())
        self.expect(")", "after the layout qualifier")
        if self.token.text != "const":   # declaration() takes the const
            self.expect("const", "(a layout(constant_id = N) declaration is a constant)")

    def declaration(self):
        const = self.token.text == "const"
        if const:
            self.take()
        type_token = self.take()
        if type_token.kind != "name" or type_token.text not in SCALAR_TYPES + TENSOR_TYPES:
            raise GlslError(f"unknown type or function {type_token.text!r}; only "
                            f"{', '.join(SCALAR_TYPES + TENSOR_TYPES)} declarations and the tensor built-ins "
                            f"are supported", type_token.line, type_token.column)
        template = None
        if type_token.text in TENSOR_TYPES and self.token.text == "<":
            self.take()
            template = [self.value()]
            while self.token.text == ",":
                self.take()
                template.append(self.value())
            self.expect(">", "after the template arguments")
        name = self.take()
        if name.kind != "name":
            raise GlslError(f"expected a variable name, found {name.text!r}", name.line, name.column)
        self.expect("=", f"after {name.text!r} (declarations must assign a value)")
        value = self.expression()
        self._check_declared_type(type_token, template, value)
        if type_token.text in TENSOR_TYPES:
            self.declared[name.text] = (type_token, template)
        return name.text, value

    def _check_declared_type(self, type_token: _Token, template, value, where: _Token | None = None) -> None:
        kind = type_token.text
        where = where or type_token
        expected = {"tensorLayoutNV": TensorLayout, "tensorViewNV": TensorView}.get(kind)
        if expected is None:   # scalar
            ok = isinstance(value, bool) if kind == "bool" else isinstance(value, int) and not isinstance(
                value, bool)
            if not ok:
                raise GlslError(f"a {kind} variable needs {'true/false' if kind == 'bool' else 'an integer'}, "
                                f"got {_describe(value)}", where.line, where.column)
            return
        if not isinstance(value, expected):
            raise GlslError(f"a {kind} variable needs a {kind} value, got {_describe(value)}", where.line,
                            where.column)
        if template is not None and _full_template(kind, template) != _template(value):
            raise GlslError(f"declared {kind}<{', '.join(map(_glsl_value, template))}> but the value is "
                            f"{kind}<{', '.join(map(_glsl_value, _template(value)))}>", where.line,
                            where.column)

    def assign(self, target: str, value, where: _Token) -> None:
        if target in self.declared and isinstance(value, (TensorLayout, TensorView)):
            type_token, template = self.declared[target]
            self._check_declared_type(type_token, template, value, where)
        self.names[target] = value
        if isinstance(value, TensorLayout):
            self.last["layout"] = target
        elif isinstance(value, TensorView):
            self.last["view"] = target

    # -- expressions -------------------------------------------------------------------------------------
    def expression(self):
        if self.token.kind == "name" and self.peek().text == "(":
            return self.call()
        return self.value()

    def value(self):
        token = self.take()
        if token.text == "-" and self.token.kind == "number":
            return -_int_literal(self.take())
        if token.kind == "number":
            return _int_literal(token)
        if token.kind == "name":
            if token.text in CONSTANTS:
                return CONSTANTS[token.text]
            if token.text in self.names:
                return self.names[token.text]
            raise GlslError(f"{token.text!r} is not a previously assigned name (only integer literals and "
                            f"names assigned above are supported)", token.line, token.column)
        raise GlslError(f"expected an integer literal or a previously assigned name, found {token.text!r}",
                        token.line, token.column)

    def call(self):
        name = self.take()
        if name.text not in BUILTINS:
            raise GlslError(f"unknown function {name.text!r}; supported: {', '.join(BUILTINS)}", name.line,
                            name.column)
        self.expect("(", f"after {name.text}")
        args, tokens = [], []
        while self.token.text != ")":
            if args:
                self.expect(",", "or ')' between arguments (arguments must be literals or names, "
                                 "not expressions)")
            tokens.append(self.token)
            args.append(self.expression())
        self.take()
        return self.apply(name, args, tokens)

    def apply(self, name: _Token, args: list, tokens: list[_Token]):
        if name.text in ("createTensorLayoutNV", "createTensorViewNV"):
            return self._create(name, args, tokens)
        builders = _LAYOUT_BUILDERS if name.text in _LAYOUT_BUILDERS else _VIEW_BUILDERS
        kind = TensorLayout if builders is _LAYOUT_BUILDERS else TensorView
        if not args or not isinstance(args[0], kind):
            where = tokens[0] if tokens else name
            raise GlslError(f"the first argument of {name.text} must be a {_KIND_NAMES[kind]}, got "
                            f"{_describe(args[0]) if args else 'nothing'}", where.line, where.column)
        builder, arg_names = builders[name.text]
        names = ["t" if kind is TensorLayout else "v", *arg_names(args[0].dim)]
        if len(args) != len(names):
            raise GlslError(f"{name.text} on a {args[0].dim}-D {_KIND_NAMES[kind]} takes {len(names)} arguments "
                            f"({', '.join(names)}), got {len(args)}", name.line, name.column)
        self._check_integers(name, args[1:], tokens[1:])
        return self._build(name, builder, args)

    def _create(self, name: _Token, args: list, tokens: list[_Token]):
        view = name.text == "createTensorViewNV"
        if not args:
            raise GlslError(f"{name.text} takes at least 1 argument (Dim), got 0", name.line, name.column)
        self._check_integers(name, args[:1], tokens[:1])
        dim = args[0] = int(args[0])
        if not 1 <= dim <= MAX_DIM:
            raise GlslError(f"Dim {dim} is out of range: tensor {'views' if view else 'layouts'} have 1..5 "
                            f"dimensions", tokens[0].line, tokens[0].column)
        most = 2 + dim if view else 2
        if len(args) > most:
            raise GlslError(f"{name.text}({dim}, ...) takes 1..{most} arguments "
                            f"({'Dim, hasDimensions, p0..p' + str(dim - 1) if view else 'Dim, Mode'}), "
                            f"got {len(args)}", name.line, name.column)
        if view:
            if len(args) > 1 and not isinstance(args[1], bool):
                raise GlslError(f"hasDimensions must be true or false, got {_describe(args[1])}", tokens[1].line,
                                tokens[1].column)
            self._check_integers(name, args[2:], tokens[2:])
            return self._build(name, createTensorViewNV, args)
        if len(args) > 1 and (isinstance(args[1], bool) or not isinstance(args[1], int)
                              or args[1] not in ClampMode._value2member_map_):
            raise GlslError(f"Mode must be a gl_CooperativeMatrixClampMode*NV constant, got {_describe(args[1])}",
                            tokens[1].line, tokens[1].column)
        return self._build(name, createTensorLayoutNV, args)

    @staticmethod
    def _check_integers(name: _Token, args, tokens) -> None:
        # The clamp-mode constants are GLSL `const int`s, so glslang takes them wherever an integer goes.
        for value, token in zip(args, tokens):
            if isinstance(value, bool) or not isinstance(value, int):
                raise GlslError(f"{name.text} needs an integer here, got {_describe(value)}", token.line,
                                token.column)

    @staticmethod
    def _build(name: _Token, builder, args):
        try:
            return builder(*args)
        except TensorSpecError as error:   # e.g. a value outside uint32, a zero block size
            raise GlslError(f"{name.text}: {error}", name.line, name.column) from None


_KIND_NAMES = {TensorLayout: "tensor layout", TensorView: "tensor view"}


def _full_template(kind: str, template: list) -> tuple:
    """The template arguments with GLSL's defaults filled in (Mode Undefined; hasDimensions false, the
    identity permutation)."""
    dim = template[0]
    if kind == "tensorLayoutNV":
        defaults = [dim, ClampMode.Undefined]
    else:
        defaults = [dim, False, *range(dim if isinstance(dim, int) and 0 < dim <= MAX_DIM else 0)]
    return tuple(template) + tuple(defaults[len(template):])


def _template(value) -> tuple:
    if isinstance(value, TensorLayout):
        return (value.dim, value.clamp_mode)
    return (value.dim, value.has_dimensions, *value.permutation)


def _describe(value) -> str:
    if isinstance(value, TensorLayout):
        return f"a {value.dim}-D tensor layout"
    if isinstance(value, TensorView):
        return f"a {value.dim}-D tensor view"
    return _glsl_value(value)


def _glsl_value(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, ClampMode):
        return MODE_NAMES[value]
    return str(value)


def parse(text: str) -> GlslProgram:
    """Run the snippet's built-in calls through :mod:`vkcoop.tensor.state`; raises :class:`GlslError`."""
    return _Parser(text).program()


# --------------------------------------------------------------------------- generation

def _uints(values) -> str:
    return ", ".join(f"{v}u" for v in values)


def to_glsl(layout: TensorLayout, view: TensorView | None = None, layout_name: str = "t",
            view_name: str = "v") -> str:
    """The GLSL statements that build exactly ``layout`` (and ``view``), in the spec's order: block size,
    dimensions (which reset offset and stride), stride, slice, clamp value; for the view: dimensions,
    stride, clip. Calls that would not change the state are left out."""
    t, mode = layout_name, MODE_NAMES[layout.clamp_mode]
    zeros = (0,) * layout.dim
    lines = [f"tensorLayoutNV<{layout.dim}, {mode}> {t} = createTensorLayoutNV({layout.dim}, {mode});"]
    built = TensorLayout.create(layout.dim, layout.clamp_mode)
    if layout.block_size != built.block_size:
        lines.append(f"{t} = setTensorLayoutBlockSizeNV({t}, {_uints(layout.block_size)});")
        built = built.set_block_size(layout.block_size)
    if layout.layout_dimension != zeros:
        lines.append(f"{t} = setTensorLayoutDimensionNV({t}, {_uints(layout.layout_dimension)});")
        built = built.set_dimension(layout.layout_dimension)
    if layout.stride != built.stride:
        lines.append(f"{t} = setTensorLayoutStrideNV({t}, {_uints(layout.stride)});")
    if layout.offset != built.offset or layout.span != built.span:
        pairs = ", ".join(f"{o}, {s}u" for o, s in zip(layout.offset, layout.span))
        lines.append(f"{t} = sliceTensorLayoutNV({t}, {pairs});")
    if layout.clamp_value:
        lines.append(f"{t} = setTensorLayoutClampValueNV({t}, 0x{layout.clamp_value:X}u);")
    if view is not None:
        lines += _view_glsl(view, view_name)
    return "\n".join(lines) + "\n"


def _view_glsl(view: TensorView, v: str) -> list[str]:
    args = ", ".join([str(view.dim), str(view.has_dimensions).lower(), *map(str, view.permutation)])
    template = f"tensorViewNV<{args}>"
    lines = [f"{template} {v} = createTensorViewNV({args});"]
    built = TensorView.create(view.dim, view.has_dimensions, view.permutation)
    if view.view_dimension != built.view_dimension:
        lines.append(f"{v} = setTensorViewDimensionsNV({v}, {_uints(view.view_dimension)});")
        built = built.set_dimensions(view.view_dimension)
    if view.view_stride != built.view_stride:
        lines.append(f"{v} = setTensorViewStrideNV({v}, {_uints(view.view_stride)});")
    clip = (view.clip_row_offset, view.clip_row_span, view.clip_col_offset, view.clip_col_span)
    if clip != (0, UINT32_MAX, 0, UINT32_MAX):
        text = ", ".join("0xFFFFFFFFu" if c == UINT32_MAX else f"{c}u" for c in clip)
        lines.append(f"{v} = setTensorViewClipNV({v}, {text});")
    return lines
