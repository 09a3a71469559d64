"""The float64 reference, the documented tolerance, and the one check every attention result passes.

Tolerance (docs/attention.md derives it). Let u be the unit roundoff of the input type (fp16 2**-11, bf16 2**-8),
e = 2**-23 one fp32 ulp at 1 (a truncating tensor-core adder may lose a whole ulp per addition), n = seq_kv,
d = head_dim, and qmax, kmax, vmax the largest magnitudes of q, k and v. Per element of O:

    |O - O_ref| <= vmax * (2u + sub + 2 delta + (2n + 4) e) + 2u |O_ref|

* 2u·vmax: P is rounded to the input type for P·V (one ulp: the conversion's rounding direction is the
  driver's), and sum_j |p_j - p~_j| |v_j| / l <= 2u·vmax because sum_j p_j / l = 1;
* sub (fp16 only) = n·2**-24: probabilities below 2**-14 are fp16 subnormals, spaced 2**-24 apart;
* delta: the error of one score in natural-log units, which moves every p by the factor e**±delta and O by at
  most 2 delta vmax: delta = scale·d·(d·qmax·kmax)·e (fp32 sums of d products) + 2 s_max e (the scale and
  log2 e multiplies, s_max = scale·d·qmax·kmax) + 2**-21 (exp2 evaluated to ~2 ulp);
* (2n + 4) e·vmax: fp32 sums of n terms in P·V and in l, and the per-block rescaling;
* 2u |O_ref|: O rounded to the input type (one ulp).

The log-sum-exp (fp32): |lse - lse_ref| <= 2 delta + (2n + 4) e + 2**-20 (1 + |lse_ref|).

For unit-scale inputs (n = 1024) this is v_max·(1.1 to 1.7 ulp) + 1 ulp·|O_ref| of the input type (one ulp at 1
is 2u); the sample's uniform-score case is exact by construction and compared bit for bit instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .shapes import check_inputs, resolve_scale

UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
FP32_ULP = 2.0 ** -23
EXP2_ERROR = 2.0 ** -21
LSE_RELATIVE = 2.0 ** -20


def reference_attention(q, k, v, *, causal: bool = False, scale=None, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(O, log-sum-exp) in float64 for q [b][hq][sq][d], k and v [b][hkv][skv][d]; query head h reads kv head
    h // (hq / hkv). ``rows``: only these query rows (O and lse then have len(rows) rows), for big checks.
    The causal mask is torch's ``is_causal``: query i sees keys 0..i."""
    _, shape = check_inputs(q, k, v)
    scale = resolve_scale(scale, shape.head_dim)
    rows = np.arange(shape.seq_q) if rows is None else np.asarray(rows, dtype=np.int64)
    qs = q[:, :, rows].astype(np.float64)
    kk = np.repeat(k.astype(np.float64), shape.group, axis=1)
    vv = np.repeat(v.astype(np.float64), shape.group, axis=1)
    scores = np.einsum("bhqd,bhkd->bhqk", qs, kk) * scale
    if causal:
        hidden = np.arange(shape.seq_kv)[None, :] > rows[:, None]
        scores = np.where(hidden, -np.inf, scores)
    peak = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - peak)
    total = weights.sum(axis=-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bhqd", weights / total, vv)
    return np.ascontiguousarray(out), np.ascontiguousarray((peak + np.log(total))[..., 0])


@dataclass(frozen=True)
class AttentionTolerance:
    """|got - ref| <= atol + rtol·|ref| for O; lse_atol + lse_rtol·|ref| for the log-sum-exp."""
    atol: float
    rtol: float
    lse_atol: float
    lse_rtol: float = LSE_RELATIVE

    def bound(self, reference: np.ndarray) -> np.ndarray:
        return self.atol + self.rtol * np.abs(reference)

    def lse_bound(self, reference: np.ndarray) -> np.ndarray:
        return self.lse_atol + self.lse_rtol * np.abs(reference)


def attention_tolerance(dtype: str, head_dim: int, seq_kv: int, *, scale: float, q_max: float = 1.0,
                        k_max: float = 1.0, v_max: float = 1.0) -> AttentionTolerance:
    """The bound of the module docstring for inputs bounded by ``q_max``, ``k_max``, ``v_max``."""
    u = UNIT_ROUNDOFF[dtype]
    e = FP32_ULP
    s_max = abs(scale) * head_dim * q_max * k_max
    delta = s_max * head_dim * e + 2 * s_max * e + EXP2_ERROR
    subnormal = seq_kv * 2.0 ** -24 if dtype == "fp16" else 0.0
    summed = (2 * seq_kv + 4) * e
    return AttentionTolerance(atol=v_max * (2 * u + subnormal + 2 * delta + summed), rtol=2 * u,
                              lse_atol=2 * delta + summed + LSE_RELATIVE)


def tolerance_for(q, k, v, scale=None) -> AttentionTolerance:
    """:func:`attention_tolerance` for these inputs (their dtype, head_dim, seq_kv and magnitudes)."""
    dtype, shape = check_inputs(q, k, v)

    def peak(array) -> float:
        return float(np.abs(array.astype(np.float32)).max())

    return attention_tolerance(dtype, shape.head_dim, shape.seq_kv, scale=resolve_scale(scale, shape.head_dim),
                               q_max=peak(q), k_max=peak(k), v_max=peak(v))


def check_attention(got, reference, tolerance: AttentionTolerance, *, lse=False) -> tuple[bool, float, str]:
    """(ok, largest |error|, why not): every element within the tolerance (NaN never is)."""
    got, reference = np.asarray(got), np.asarray(reference)
    if got.shape != reference.shape:
        return False, float("inf"), f"result has shape {got.shape}, the reference {reference.shape}"
    error = np.abs(got.astype(np.float64) - reference.astype(np.float64))
    bound = tolerance.lse_bound(reference) if lse else tolerance.bound(reference)
    bad = ~(error <= bound)
    worst = float(np.nanmax(np.where(np.isnan(error), np.inf, error))) if error.size else 0.0
    if not bad.any():
        return True, worst, ""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    what = "log-sum-exp" if lse else "O"
    return False, worst, (f"{int(bad.sum())} {what} elements outside the tolerance, first at {index}: got "
                          f"{float(got[index])!r}, reference {float(reference[index])!r}, bound "
                          f"{float(bound[index]):.3g}")
