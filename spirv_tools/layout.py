"""Byte extent of explicitly laid-out types (push-constant blocks), from a module's types and decorations.

Vulkan spec 16.2 "Offset and Stride Assignment": block members carry an Offset, arrays an ArrayStride. The size
a push-constant range must cover is the end of the block's last member (VUID-VkComputePipelineCreateInfo-
layout-07987: the layout's range must contain the block). Anything whose extent this cannot tell for sure
(matrices, whose MatrixStride sits on the member, booleans, logical pointers) gives None: the caller then
has no size to check against.
"""
from __future__ import annotations

import re

DECORATION_ARRAY_STRIDE = 6
STORAGE_PHYSICAL_STORAGE_BUFFER = 5349
_SCALAR = re.compile(r"^(?:u?int|float)(\d+)$")


def type_size(type_id, types: dict, decorations: dict, member_offsets: dict, constants: dict,
              _seen: frozenset = frozenset()) -> int | None:
    """Bytes spanned by a value of ``type_id``: the end of the last member for a struct, ``length * ArrayStride``
    for an array, the component size times the count for a vector, 8 for a PhysicalStorageBuffer pointer."""
    if type_id in _seen or type_id not in types:
        return None  # a cycle (only a corrupted module has one) or an unknown type
    seen = _seen | {type_id}
    entry = types[type_id]
    kind = entry[0]
    scalar = _SCALAR.match(kind)
    if scalar:
        bits = int(scalar.group(1))
        return bits // 8 if bits and bits % 8 == 0 else None
    if kind == "pointer":
        return 8 if entry[1] == STORAGE_PHYSICAL_STORAGE_BUFFER else None
    if kind == "vector":
        component = type_size(entry[1], types, decorations, member_offsets, constants, seen)
        return None if component is None else component * entry[2]
    if kind == "array":
        length = constants.get(entry[2])
        if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
            return None
        stride = decorations.get(type_id, {}).get(DECORATION_ARRAY_STRIDE)
        if stride is None:
            stride = type_size(entry[1], types, decorations, member_offsets, constants, seen)
        return None if stride is None else length * stride
    if kind == "struct":
        end = 0
        for member, member_type in enumerate(entry[1:]):
            offset = member_offsets.get((type_id, member))
            size = type_size(member_type, types, decorations, member_offsets, constants, seen)
            if offset is None or size is None:
                return None
            end = max(end, offset + size)
        return end
    return None
