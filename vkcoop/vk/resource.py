"""The one lifetime rule of vkcoop.vk: objects are closed deterministically, by ``with`` or close()."""
from __future__ import annotations


class Resource:
    """A Vulkan-backed object: ``with`` closes it on exit; ``close()`` is idempotent."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
