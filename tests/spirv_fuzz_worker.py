"""Fuzz worker for tests/test_spirv_fuzz.py, run in a subprocess so that a crash in the driver or the validation
layer fails the test instead of killing pytest.

Feeds hypothesis-generated truncations and bit flips of real modules to ``spirv_tools.reflect`` and to
``Device.pipeline`` (one device, reused) and accepts only the package's errors. Prints one JSON line with the
counts; any other exception propagates and the process exits non-zero.

    python tests/spirv_fuzz_worker.py REFLECT_EXAMPLES PIPELINE_EXAMPLES VALIDATE(0|1)
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spirv_tools
import vkcoop
from vkcoop import vk

REPO = Path(__file__).resolve().parent.parent
# Plain compute shaders lavapipe runs; reflection also gets a cooperative_matrix2 module (the driver would
# refuse its capabilities with VK_ERROR_UNKNOWN, which says nothing about the module's health).
PIPELINE_SHADERS = ["test/axpy.comp", "test/spec_types.comp", "test/increment.comp", "test/buffer_reference.comp"]
REFLECT_SHADERS = PIPELINE_SHADERS + ["tensor/load_store.comp"]


def modules(names) -> list[bytes]:
    return [spirv_tools.compile(path=REPO / "shaders" / name) for name in names]


@st.composite
def damaged(draw, sources: list[bytes]) -> bytes:
    """A module cut at any byte, with up to three bits flipped, or both."""
    module = bytearray(draw(st.sampled_from(sources)))
    kind = draw(st.sampled_from(["cut", "flip", "cut+flip"]))
    if "cut" in kind:
        word_aligned = draw(st.booleans())
        cut = draw(st.integers(0, len(module) - 1))
        module = module[:cut - cut % 4 if word_aligned else cut]
    if "flip" in kind and module:
        for _ in range(draw(st.integers(1, 3))):
            bit = draw(st.integers(0, 8 * len(module) - 1))
            module[bit // 8] ^= 1 << (bit % 8)
    return bytes(module)


def run(reflect_examples: int, pipeline_examples: int, validate: bool) -> dict:
    counts = Counter()
    options = dict(deadline=None, database=None, derandomize=True,
                   suppress_health_check=list(HealthCheck))

    @settings(max_examples=reflect_examples, **options)
    @given(damaged(modules(REFLECT_SHADERS)))
    def reflect_only(module):
        counts["reflect examples"] += 1
        try:
            spirv_tools.reflect(module)
            counts["reflect parsed"] += 1
        except spirv_tools.SpirvFormatError:
            counts["reflect rejected"] += 1

    with vk.Device(validate=validate, pipeline_cache=False,
                   features=["maintenance4", "bufferDeviceAddress"]) as device:
        @settings(max_examples=pipeline_examples, **options)
        @given(damaged(modules(PIPELINE_SHADERS)))
        def pipeline(module):
            counts["pipeline examples"] += 1
            try:
                device.pipeline(module, name="fuzzed").close()
                counts["pipeline created"] += 1
            except vkcoop.Error as error:  # the package's errors only; anything else propagates
                counts[f"pipeline {type(error).__name__}"] += 1
            device.instance.take_messages()  # the layer may comment on modules the driver accepted

        reflect_only()
        pipeline()
    return dict(counts)


if __name__ == "__main__":
    print(json.dumps(run(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1")))
