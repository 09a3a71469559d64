"""The attention cases ``vkcoop bench attention`` times, and the job that names one case with configurations to run.

Prefill: seq_q = seq_kv, batch = :data:`PREFILL_TOKENS` // seq so that every case carries the same number of query
rows, and :data:`HIDDEN` // head_dim heads on q, k and v. Decode: one query row, long seq_kv, 32 q heads on 8 kv
heads (GQA) or on 32 (:data:`DECODE_HEADS`).

A job is ``KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG[,CONFIG...]`` (:data:`JOB_GRAMMAR`): the case of that kind,
dtype, head dim and sequence length (``c``: causal; decode is never causal; decode has GQA unless ``n``; ``bBATCH``:
decode at that batch, as ``bench attention --decode-batch``), and configurations as
:class:`vkcoop.attention.AttentionConfig` labels. ``vkcoop inspect --attention`` takes a job of one configuration;
the explore tool of the lab times many.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .shapes import AttentionInputError, AttentionShape, check_dtype, check_head_dim
from .tiles import AttentionConfig, parse_attention_config

KINDS = ("prefill", "decode")
PREFILL_TOKENS = 16384     # batch x seq of every prefill case
HIDDEN = 2048              # q heads x head_dim
DECODE_HEADS = ((32, 8), (32, 32))   # (q heads, kv heads) of the decode cases: GQA 4:1, and without GQA
JOB_GRAMMAR = "KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG[,CONFIG...]"
_SEQ = re.compile(r"(\d+)([cn]?)(?:b(\d+))?")


@dataclass(frozen=True)
class AttentionCase:
    kind: str
    dtype: str
    causal: bool
    shape: AttentionShape

    @property
    def label(self) -> str:
        return f"{self.kind} {self.dtype} {self.shape.label()}{' causal' if self.causal else ''}"


def prefill_shape(seq: int, head_dim: int, tokens: int = PREFILL_TOKENS, hidden: int = HIDDEN) -> AttentionShape:
    """A prefill case's shape: seq queries and keys, ``tokens`` query rows and ``hidden`` // head_dim heads."""
    heads = max(1, hidden // head_dim)
    return AttentionShape(max(1, tokens // seq), heads, heads, seq, seq, head_dim)


def decode_shape(seq_kv: int, head_dim: int, heads: tuple[int, int] = DECODE_HEADS[0],
                 batch: int = 1) -> AttentionShape:
    """A decode case's shape: one query row, ``heads`` (q heads, kv heads)."""
    return AttentionShape(batch, heads[0], heads[1], 1, seq_kv, head_dim)


def parse_job(text: str) -> tuple[AttentionCase, list[AttentionConfig]]:
    """(case, configurations) of a job (module docstring); AttentionInputError naming the job for anything
    malformed."""
    try:
        kind, dtype, head_dim, seq, configs = text.split("/")
        length, flag, batch = _SEQ.fullmatch(seq).groups()
        head_dim, length = int(head_dim), int(length)
    except (ValueError, AttributeError):
        raise AttentionInputError(f"job {text!r} is not {JOB_GRAMMAR}") from None
    if kind not in KINDS:
        raise AttentionInputError(f"job {text!r}: kind {kind!r}: choose from {', '.join(KINDS)}")
    if flag == "c" and kind == "decode":
        raise AttentionInputError(f"job {text!r}: decode is not causal")
    if (flag == "n" or batch) and kind != "decode":
        raise AttentionInputError(f"job {text!r}: {'n (no GQA)' if flag == 'n' else 'b (batch)'} names a decode case")
    try:
        check_dtype(dtype)
        check_head_dim(head_dim)
    except AttentionInputError as error:
        raise AttentionInputError(f"job {text!r}: {error}") from None
    if length < 1 or int(batch or 1) < 1:
        raise AttentionInputError(f"job {text!r}: the sequence length and the batch must be >= 1")
    labels = [c for c in configs.split(",") if c]
    if not labels:
        raise AttentionInputError(f"job {text!r} names no configuration")
    if kind == "prefill":
        case = AttentionCase(kind, dtype, flag == "c", prefill_shape(length, head_dim))
    else:
        heads = DECODE_HEADS[-1] if flag == "n" else DECODE_HEADS[0]
        case = AttentionCase(kind, dtype, False, decode_shape(length, head_dim, heads, int(batch or 1)))
    return case, [parse_attention_config(label) for label in labels]


__all__ = ["AttentionCase", "DECODE_HEADS", "HIDDEN", "JOB_GRAMMAR", "KINDS", "PREFILL_TOKENS", "decode_shape",
           "parse_job", "prefill_shape"]
