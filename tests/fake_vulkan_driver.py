"""A stand-in Vulkan driver under vkcoop.inspect.executables and vkcoop.inspect.query, for tests without a GPU.

:func:`install` swaps ``executables.vk`` for a module whose ``lib`` is :class:`FakeDriver` (Python functions
with the Vulkan signatures the capture path calls) and whose ``ffi`` is the ``vulkan`` package's own, except that
``ffi.new`` tracks when each allocation is freed and ``ffi.cast("PFN_...")`` turns the driver's proc address
back into the Python function. ``query.open_physical`` yields a :class:`FakePhysical`. Everything else in the
capture path (structs, pNext chains, the call sequence, the progress file) is vkcoop's own code.

Run as a script it is the query child, as ``vkcoop inspect`` starts it::

    python -X faulthandler tests/fake_vulkan_driver.py REQUEST.json RESULT.json PROGRESS.txt

``FAKE_DRIVER_CRASH_IN=vkGetPipelineExecutableStatisticsKHR`` (or ``NAME#N``: its N-th call) makes that
function kill the process with SIGSEGV, inside the "driver", as the NVIDIA driver 580.159.04 did.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import types
import weakref
from pathlib import Path

import vulkan

REPO = Path(__file__).resolve().parent.parent
CRASH_ENV = "FAKE_DRIVER_CRASH_IN"
#: (name, VkPipelineExecutableStatisticFormatKHR, value) of every statistic the fake reports.
STATISTICS = (("Register Count", 2, 151), ("Spilled", 0, 0), ("Occupancy", 3, 0.25))
REPRESENTATION = b"// fake SASS\nHMMA.16816.F32 R4, R8, R12, R4 ;\n"
FEATURES_STYPE = 1000269000


class FakePhysical:
    name = "Fake NVIDIA H100"

    def __init__(self, extensions=("VK_KHR_pipeline_executable_properties",)):
        self.handle = vulkan.ffi.cast("VkPhysicalDevice", 0x10)
        self.extensions = set(extensions)

    def compute_queue_family(self) -> int:
        return 0


class _Proc:
    """What the fake vkGetDeviceProcAddr returns: a name the fake ffi.cast turns back into a function."""

    def __init__(self, name):
        self.name = name


class TrackingFFI:
    """The vulkan package's ffi, with every ``new`` watched: ``alive(address)`` says whether the allocation at
    that address is still referenced."""

    def __init__(self, driver):
        self._real, self._driver, self._live = vulkan.ffi, driver, {}

    def __getattr__(self, name):
        return getattr(self._real, name)

    def new(self, ctype, *init):
        made = self._real.new(ctype, *init)
        address = int(self._real.cast("uintptr_t", made))
        self._live[address] = ctype
        weakref.finalize(made, self._live.pop, address, None)
        return made

    def alive(self, pointer) -> bool:
        return int(self._real.cast("uintptr_t", pointer)) in self._live

    def cast(self, ctype, value):
        if isinstance(value, _Proc):
            return getattr(self._driver, value.name)
        return self._real.cast(ctype, value)


class FakeDriver:
    """The Vulkan functions the capture path calls. ``calls`` lists them in order; ``crash_in`` ("NAME" or
    "NAME#N") kills the process with SIGSEGV inside that call."""

    def __init__(self, crash_in: str | None = None, events: list | None = None):
        name, _, nth = (crash_in or "").partition("#")
        self.crash_name, self.crash_nth = name or None, int(nth or 1)
        self.calls, self.events = [], events if events is not None else []
        self.ffi = TrackingFFI(self)
        self.extension_names: list[str] = []
        self.dangling: list[str] = []        # create-info members that pointed at freed memory during a call
        self._next = 0x1000

    def _enter(self, name):
        self.calls.append(name)
        self.events.append(("call", name))
        if name == self.crash_name and self.calls.count(name) == self.crash_nth:
            os.kill(os.getpid(), signal.SIGSEGV)

    def _handle(self, ctype):
        self._next += 0x10
        return vulkan.ffi.cast(ctype, self._next)

    def vkGetPhysicalDeviceFeatures2(self, physical, features2):
        self._enter("vkGetPhysicalDeviceFeatures2")
        probe = vulkan.ffi.cast("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*", features2.pNext)
        probe.pipelineExecutableInfo = 1

    def vkCreateDevice(self, physical, info, allocator, out):
        self._enter("vkCreateDevice")
        if not self.ffi.alive(info.ppEnabledExtensionNames):
            self.dangling.append("ppEnabledExtensionNames")
            return -7  # reading the names now would read freed memory (and crash, as a driver may)
        self.extension_names = [vulkan.ffi.string(info.ppEnabledExtensionNames[i]).decode()
                                for i in range(info.enabledExtensionCount)]
        if not self._chain_enables_executable_info(info.pNext):
            return -3  # VK_ERROR_INITIALIZATION_FAILED: the feature was not asked for
        out[0] = self._handle("VkDevice")
        return 0

    @staticmethod
    def _chain_enables_executable_info(pointer) -> bool:
        while pointer != vulkan.ffi.NULL:
            base = vulkan.ffi.cast("VkBaseOutStructure*", pointer)
            if base.sType == FEATURES_STYPE:
                return bool(vulkan.ffi.cast("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*",
                                            pointer).pipelineExecutableInfo)
            pointer = base.pNext
        return False

    def vkGetDeviceProcAddr(self, device, name):
        self._enter("vkGetDeviceProcAddr")
        return _Proc(name.decode())

    def vkCreateDescriptorSetLayout(self, device, info, allocator, out):
        self._enter("vkCreateDescriptorSetLayout")
        out[0] = self._handle("VkDescriptorSetLayout")
        return 0

    def vkCreatePipelineLayout(self, device, info, allocator, out):
        self._enter("vkCreatePipelineLayout")
        out[0] = self._handle("VkPipelineLayout")
        return 0

    def vkCreateShaderModule(self, device, info, allocator, out):
        self._enter("vkCreateShaderModule")
        if not self.ffi.alive(info.pCode):
            self.dangling.append("pCode")
            return -3
        out[0] = self._handle("VkShaderModule")
        return 0

    def vkCreateComputePipelines(self, device, cache, count, infos, allocator, out):
        self._enter("vkCreateComputePipelines")
        stage = infos[0].stage
        if vulkan.ffi.string(stage.pName) != b"main" or not infos[0].flags & 0xC0:
            return -13  # VK_ERROR_UNKNOWN: not what the capture path must pass
        out[0] = self._handle("VkPipeline")
        return 0

    def _destroy(name):  # noqa: N805 - a factory for the vkDestroy* methods
        def destroy(self, *args):
            self._enter(name)
        return destroy

    vkDestroyShaderModule = _destroy("vkDestroyShaderModule")
    vkDestroyPipeline = _destroy("vkDestroyPipeline")
    vkDestroyPipelineLayout = _destroy("vkDestroyPipelineLayout")
    vkDestroyDescriptorSetLayout = _destroy("vkDestroyDescriptorSetLayout")
    vkDestroyDevice = _destroy("vkDestroyDevice")

    def vkGetPipelineExecutablePropertiesKHR(self, device, info, count, properties):
        self._enter("vkGetPipelineExecutablePropertiesKHR")
        if properties == vulkan.ffi.NULL:
            count[0] = 1
            return 0
        properties[0].stages, properties[0].subgroupSize = 0x20, 32
        properties[0].name, properties[0].description = b"Compute Shader", b"the one stage"
        return 0

    def vkGetPipelineExecutableStatisticsKHR(self, device, executable, count, items):
        self._enter("vkGetPipelineExecutableStatisticsKHR")
        if items == vulkan.ffi.NULL:
            count[0] = len(STATISTICS)
            return 0
        for i, (name, fmt, value) in enumerate(STATISTICS[:count[0]]):
            items[i].name, items[i].format = name.encode(), fmt
            setattr(items[i].value, {0: "b32", 2: "u64", 3: "f64"}[fmt], value)
        return 0

    def vkGetPipelineExecutableInternalRepresentationsKHR(self, device, executable, count, items):
        self._enter("vkGetPipelineExecutableInternalRepresentationsKHR")
        if items == vulkan.ffi.NULL:
            count[0] = 1
            return 0
        items[0].name, items[0].isText = b"SASS", 1
        if items[0].pData == vulkan.ffi.NULL:
            items[0].dataSize = len(REPRESENTATION) + 1
            return 0
        if items[0].dataSize < len(REPRESENTATION) + 1:
            return 5  # VK_INCOMPLETE
        vulkan.ffi.memmove(items[0].pData, REPRESENTATION + b"\0", len(REPRESENTATION) + 1)
        return 0


def install(setattr_=setattr, crash_in: str | None = None, events: list | None = None,
            physical: FakePhysical | None = None) -> FakeDriver:
    """Put a :class:`FakeDriver` under vkcoop.inspect's capture path (``setattr_``: pytest's
    ``monkeypatch.setattr`` in a test, plain ``setattr`` in the script)."""
    from vkcoop.inspect import executables, query
    driver = FakeDriver(crash_in, events)
    fake_vk = types.ModuleType("fake_vulkan")
    fake_vk.__dict__.update({k: v for k, v in vars(vulkan).items() if k.startswith("VK_")})
    fake_vk.lib, fake_vk.ffi = driver, driver.ffi
    setattr_(executables, "vk", fake_vk)

    @contextlib.contextmanager
    def open_physical(device, progress):
        progress("vkCreateInstance")
        yield physical or FakePhysical()
    setattr_(query, "open_physical", open_physical)
    return driver


def main(argv=None) -> int:
    sys.path.insert(0, str(REPO))
    from vkcoop.inspect import query
    install(crash_in=os.environ.get(CRASH_ENV))
    return query.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
