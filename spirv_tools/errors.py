"""The root of every error spirv_tools and vkcoop raise on purpose.

spirv_tools is the lowest layer and imports nothing of vkcoop, so the root lives here; ``vkcoop.Error`` is
this class. Each layer derives its own errors from :class:`Error` (and from ValueError or TypeError where the
caller passed a bad value or a value of the wrong type), so ``except vkcoop.Error`` catches them all.
"""
from __future__ import annotations


class Error(Exception):
    """Base class of every spirv_tools and vkcoop error."""


class InputError(Error, ValueError):
    """A public function got a bad argument; the message names the parameter."""


class InputTypeError(InputError, TypeError):
    """A public function got an argument of the wrong type; the message names the parameter."""
