"""vkcoop.tensor on bad input: every public entry point raises a vkcoop.Error naming the parameter, never an
AttributeError, OverflowError or a silently wrong value."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import vkcoop
from vkcoop import tensor
from vkcoop.tensor import ClampMode, TensorLayout, TensorSpecError, TensorTypeError, TensorView
from vkcoop.tensor import vectorized

L2 = TensorLayout.create(2, ClampMode.Constant).set_dimension(4, 4)
COMPONENTS = [np.float16, ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
              np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32]


def test_tensor_errors_are_package_errors():
    for error in (TensorSpecError, TensorTypeError, tensor.UndefinedBehaviorError, tensor.TensorIndexError):
        assert issubclass(error, vkcoop.Error) and issubclass(error, ValueError)
    assert issubclass(TensorTypeError, TypeError) and issubclass(tensor.TensorIndexError, IndexError)


@pytest.mark.parametrize("mode", [1.0, True, "Constant", None])
def test_clamp_mode_must_be_an_integer(mode):
    with pytest.raises(TensorTypeError, match="clamp_mode must be an integer"):
        TensorLayout.create(2, mode)


def test_clamp_mode_accepts_enums_and_ints():
    assert TensorLayout.create(2, 1).clamp_mode is ClampMode.Constant
    assert TensorLayout.create(2, np.int32(3)).clamp_mode is ClampMode.Repeat


@pytest.mark.parametrize("value, dtype, message", [
    (0.5, np.int32, "not an integer"),
    (1e10, np.float16, "outside the range of float16"),
    (300, np.int8, r"outside the range of int8 \(-128..127\)"),
    (0.1, np.float16, r"not exactly representable in float16 \(nearest: 0.0999"),
    (np.inf, ml_dtypes.float8_e4m3fn, "has no infinity"),
    (2.0**40, np.float32, None),
    (True, np.int32, "real number, got bool"),
    ("1", np.int32, "real number, got str"),
    (1.0, np.float64, "wider than the 32-bit clampValue"),
    (1.0, "no-such-type", "is not a numpy dtype"),
    (1.0, np.complex64, "wider|not an integer or floating-point"),
])
def test_clamp_value_bits_refuses_what_the_type_cannot_hold(value, dtype, message):
    if message is None:
        assert tensor.clamp_value_as(tensor.clamp_value_bits(value, dtype), dtype) == value
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the old code only warned (overflow in cast) and returned inf
        with pytest.raises(TensorSpecError, match=message):
            tensor.clamp_value_bits(value, dtype)


def test_rounding_is_explicit():
    assert tensor.clamp_value_bits(0.1, np.float16, rounding=True) == 0x2E66
    assert tensor.clamp_value_bits(2.5, np.int32, rounding=True) == 2  # ties to even
    assert tensor.clamp_value_bits(-0.5, np.float16) == 0xB800
    with pytest.raises(TensorSpecError, match="outside the range"):
        tensor.clamp_value_bits(1e10, np.float16, rounding=True)


@pytest.mark.parametrize("bits, message", [(0.7, "clamp_value must be an integer, got float"),
                                           (-1, "must fit uint32"), (1 << 32, "must fit uint32")])
def test_clamp_value_as_takes_raw_uint32_bits(bits, message):
    with pytest.raises(TensorSpecError, match=message):
        tensor.clamp_value_as(bits, np.float16)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(COMPONENTS), st.one_of(st.floats(allow_nan=False), st.integers(-2**40, 2**40)))
def test_clamp_value_bits_round_trips_or_refuses(dtype, value):
    """Either the bits decode to exactly the value, or the call says why it cannot."""
    try:
        bits = tensor.clamp_value_bits(value, dtype)
    except TensorSpecError as error:
        assert "range" in str(error) or "representable" in str(error) or "integer" in str(error)
        return
    assert 0 <= bits <= 0xFFFFFFFF
    assert float(tensor.clamp_value_as(bits, dtype)) == value


def test_matrix_coordinates_are_checked():
    with pytest.raises(TensorSpecError, match="exceeds uint32"):
        tensor.element_address(L2, 2**40, 0, 4)  # used to return IN_BOUNDS index 0: the row wrapped
    with pytest.raises(TensorTypeError, match="row must be an integer, got float 2.5"):
        tensor.element_address(L2, 2.5, 0, 4)
    with pytest.raises(TensorTypeError, match="t .the tensor layout. must be a TensorLayout"):
        tensor.element_address("layout", 0, 0, 4)
    with pytest.raises(TensorTypeError, match="v .the tensor view. must be a TensorView"):
        tensor.element_address(L2, 0, 0, 4, view=(1, 0))
    with pytest.raises(TensorSpecError, match="divisor b is 0"):
        tensor.smod(3, 0)
    assert tensor.element_address(L2, np.int64(1), np.uint8(2), 4).index == 6


def test_load_and_store_check_their_arguments_first():
    with pytest.raises(TensorTypeError, match="buffer must be a numpy array, got list"):
        tensor.load([0] * 64, L2, 4, 4)
    with pytest.raises(TensorTypeError, match="rows must be a positive int, got float"):
        tensor.load(np.zeros(64, np.float32), L2, 4.0, 4)
    with pytest.raises(TensorTypeError, match="dtype 'nope' is not a numpy dtype"):
        tensor.load(np.zeros(64, np.float32), L2, 4, 4, dtype="nope")
    with pytest.raises(TensorTypeError, match="decode must be callable"):
        tensor.load(np.zeros(64, np.float32), L2, 4, 4, dtype=np.float32, decode=3)
    with pytest.raises(TensorTypeError, match="t .the tensor layout. must be a TensorLayout"):
        tensor.store(np.zeros((4, 4), np.float32), np.zeros(64, np.float32), None)
    with pytest.raises(TensorTypeError, match="matrix must be a numpy array"):
        tensor.store([[1.0]], np.zeros(64, np.float32), L2)
    with pytest.raises(tensor.TensorIndexError, match="beyond the buffer"):
        tensor.load(np.zeros(4, np.float32), L2, 4, 4)


def test_index_map_size_guard_names_the_memory(monkeypatch):
    with pytest.raises(TensorSpecError, match=r"65536 x 65536 = 4294967296 elements is above max_elements "
                                              r"\(268435456\): its result alone would need 356.0 GiB"):
        tensor.index_map(TensorLayout.create(5, ClampMode.Repeat).set_dimension(1, 1, 1, 1, 1), 65536, 65536)
    small = TensorLayout.create(1).set_dimension(64)
    with pytest.raises(TensorSpecError, match="above max_elements .10."):
        tensor.index_map(small, 4, 4, max_elements=10)
    monkeypatch.setattr(vectorized, "MAX_ELEMENTS", 16)
    assert tensor.index_map(small, 4, 4).indices.shape == (4, 4)
    with pytest.raises(TensorSpecError, match="above max_elements"):
        tensor.load(np.zeros(64, np.float32), small, 4, 5)
    assert tensor.index_map(small, 4, 5, max_elements=20).status.shape == (4, 5)


_JUNK = st.one_of(st.none(), st.booleans(), st.floats(), st.integers(-2**70, 2**70), st.text(max_size=3),
                  st.lists(st.integers(-3, 3), max_size=6), st.just(np.float32(1.5)), st.just(np.int64(-1)))


@settings(max_examples=400, deadline=None)
@example("create_view", 1, None, False)   # a bool permutation once escaped as a TypeError
@given(st.sampled_from(["create_layout", "set_dimension", "slice", "create_view", "element_address",
                        "index_map", "clamp_value_as", "clamp_coordinate", "span_coord"]), _JUNK, _JUNK, _JUNK)
def test_junk_arguments_raise_package_errors_only(entry, a, b, c):
    calls = {
        "create_layout": lambda: TensorLayout.create(a, b),
        "set_dimension": lambda: L2.set_dimension(a, b),
        "slice": lambda: L2.slice(a, b),
        "create_view": lambda: TensorView.create(a, b, c),
        "element_address": lambda: tensor.element_address(L2, a, b, c),
        "index_map": lambda: tensor.index_map(L2, a, b, op=c),
        "clamp_value_as": lambda: tensor.clamp_value_as(a, b),
        "clamp_coordinate": lambda: tensor.clamp_coordinate(a, b, c),
        "span_coord": lambda: tensor.span_coord_to_tensor_coord(L2, a),
    }
    try:
        calls[entry]()
    except vkcoop.Error:
        pass
