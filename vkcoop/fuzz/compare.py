"""Reference arrays for a batch of cases and the element-by-element comparison with a target's results.

Arrays follow :class:`vkcoop.portable.AddressingResult`: (n, E) indices / status, (n, E, 5) coordinates,
padding elements (beyond rows*cols) with status 255.

* portable: everything must be equal, statuses included (UNDEFINED too: the port mirrors the reference).
* hw loads: status and, in bounds, the index must match; elements the reference calls UNDEFINED are not
  compared (the generator avoids them anyway). Decode loads also compare blockCoord and coordInBlock.
* hw stores: an element the reference writes at a unique index must be found there; one that shares its
  index with other elements (span smaller than the matrix) may lose the race but not land elsewhere; an
  element the reference discards or clips must not be written; and the set of written positions must equal
  the reference's.
"""
from __future__ import annotations

import numpy as np

from ..portable import MAX_DIM, reference_arrays
from ..tensor import ElementStatus
from .cases import STORE_REGION

PAD = 255
IN = ElementStatus.IN_BOUNDS


def reference_batch(cases, elements: int):
    """(indices int64, status uint8, block_coord int32, coord_in_block int32) for ``cases`` padded to ``elements``."""
    n = len(cases)
    indices = np.empty((n, elements), dtype=np.int64)
    status = np.empty((n, elements), dtype=np.uint8)
    block = np.empty((n, elements, MAX_DIM), dtype=np.int32)
    inblock = np.empty((n, elements, MAX_DIM), dtype=np.int32)
    for k, case in enumerate(cases):
        indices[k], status[k], block[k], inblock[k] = reference_arrays(case, elements)
    return indices, status, block, inblock


def slice_reference(ref, rows, elements: int | None = None):
    """The reference arrays of the cases at ``rows`` (and the first ``elements`` elements)."""
    e = slice(None) if elements is None else slice(0, elements)
    return tuple(a[rows][:, e] for a in ref)


def element_mismatches(target: str, kind: str, ref, obs) -> np.ndarray:
    """(n, E) bool: elements whose observed result contradicts the reference.
    ``obs`` is (indices, status, block_coord or None, coord_in_block or None)."""
    r_idx, r_st, r_bc, r_cib = ref
    o_idx, o_st, o_bc, o_cib = obs
    if target == "portable":
        return ((r_idx != o_idx) | (r_st != o_st) | (r_bc != o_bc).any(-1) | (r_cib != o_cib).any(-1))
    if kind == "store":
        written = r_st == IN
        dup = _shared_index(r_idx, written)
        return ((written & ~dup & (o_idx != r_idx)) | (~written & (o_idx >= 0))
                | (written & dup & (o_idx >= 0) & (o_idx != r_idx)))
    considered = (r_st != PAD) & (r_st != ElementStatus.UNDEFINED)
    inb = r_st == IN
    bad = considered & ((r_st != o_st) | (inb & (r_idx != o_idx)))
    if kind == "decode":
        bad |= considered & inb & ((r_bc != o_bc).any(-1) | (r_cib != o_cib).any(-1))
    return bad


def _shared_index(indices, written) -> np.ndarray:
    """(n, E) bool: written elements whose index another written element of the same case also has."""
    n, e = indices.shape
    case_ix = np.broadcast_to(np.arange(n)[:, None], indices.shape)
    keys = np.where(written, case_ix * (1 << 33) + indices, -1 - np.arange(n * e).reshape(n, e))
    _, inverse, counts = np.unique(keys.reshape(-1), return_inverse=True, return_counts=True)
    return (counts[inverse] > 1).reshape(n, e) & written


def store_position_mismatch(ref, written: np.ndarray) -> np.ndarray:
    """(n,) bool: the written positions differ from the reference's (stores only)."""
    r_idx, r_st = ref[0], ref[1]
    n = r_idx.shape[0]
    expected = np.zeros((n, STORE_REGION), dtype=bool)
    case_ix, element = np.nonzero((r_st == IN) & (r_idx < STORE_REGION))
    expected[case_ix, r_idx[case_ix, element]] = True
    beyond = ((r_st == IN) & (r_idx >= STORE_REGION)).any(axis=1)
    return (expected != written).any(axis=1) | beyond


def case_mismatches(target: str, kind: str, ref, obs, written=None, corrupt=None):
    """((n,) bool case mismatch, (n, E) bool element mismatch)."""
    elements = element_mismatches(target, kind, ref, obs)
    cases = elements.any(axis=1)
    if written is not None:
        cases |= store_position_mismatch(ref, written)
    if corrupt is not None:
        cases |= corrupt
    return cases, elements
