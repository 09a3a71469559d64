"""Command buffers recorded once and submitted many times, with GPU timestamps around each dispatch."""
from __future__ import annotations

import numpy as np
import vulkan as vk

from . import checks
from .errors import (DeviceLostError, FenceTimeoutError, LimitError, PipelineInputError, VulkanError,
                     VulkanTypeError, check)
from .memory import WHOLE_SIZE, Buffer
from .packing import push_constant_bytes
from .pipeline import SHADER_STAGE_COMPUTE, ComputePipeline
from .resource import Resource

_ALL_COMMANDS = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
# Indirection so tests can simulate VK_TIMEOUT / VK_ERROR_DEVICE_LOST without a hung GPU.
_wait_for_fences = vk.lib.vkWaitForFences
_MEMORY_READ_WRITE = vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT
_COMPUTE = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT


def memory_barrier(command_buffer, src_stage=_ALL_COMMANDS, dst_stage=_ALL_COMMANDS,
                   src_access=vk.VK_ACCESS_MEMORY_WRITE_BIT, dst_access=_MEMORY_READ_WRITE):
    barrier = vk.ffi.new("VkMemoryBarrier*", {"sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                              "srcAccessMask": src_access, "dstAccessMask": dst_access})
    vk.lib.vkCmdPipelineBarrier(command_buffer, src_stage, dst_stage, 0, 1, barrier, 0, vk.ffi.NULL, 0, vk.ffi.NULL)


def dispatch_barrier(command_buffer):
    """What one dispatch needs from the dispatch before it in the same command buffer: its shader writes made
    visible to shader reads and writes. Shader access masks, not MEMORY_READ/WRITE: on the H100 the memory masks
    cost about 1.2 µs more between attention's key-split pass and its combine (docs/attention.md, experiment 27)."""
    memory_barrier(command_buffer, _COMPUTE, _COMPUTE, vk.VK_ACCESS_SHADER_WRITE_BIT,
                   vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)


def elapsed_ns(start: int, end: int, valid_bits: int, period_ns: float) -> float:
    """Nanoseconds between two raw timestamps: only the low ``valid_bits`` bits are meaningful (Vulkan spec,
    "Timestamp Queries"), the counter may wrap once between them, and one tick lasts ``timestampPeriod`` ns."""
    if not 0 < valid_bits <= 64:
        raise VulkanError(f"timestampValidBits {valid_bits} is not in [1, 64]")
    mask = (1 << valid_bits) - 1
    return ((end & mask) - (start & mask) & mask) * period_ns


class CommandBuffer(Resource):
    """A primary command buffer with its own fence (and timestamp query pool when ``timestamps=True``).

    Record once::

        with device.command_buffer(timestamps=True) as commands:
            with commands.recording():
                commands.dispatch(pipeline, [a, b, out], groups=(64, 1, 1), push=(n,))
            for _ in range(10):
                commands.submit()                 # waits, raises FenceTimeoutError / DeviceLostError
                print(commands.dispatch_times_ns())

    Every recording starts with a full memory barrier (earlier submissions and host writes become visible) and
    puts a compute->compute barrier between dispatches, so consecutive dispatches see each other's results.
    """

    def __init__(self, device, *, timestamps: bool = False, max_dispatches: int = 64, name: str = "commands"):
        self.device, self.name = device, checks.text(name, "name")
        timestamps = checks.flag(timestamps, "timestamps")
        max_dispatches = checks.integer(max_dispatches, "max_dispatches", minimum=1, maximum=1 << 20)
        self.handle = self.fence = self.query_pool = None
        self._descriptor_pools = []
        self._keep = []
        self._dispatch_count = 0
        self._state = "initial"   # initial -> recording -> executable -> pending -> executable
        self.timestamps = timestamps
        self.max_dispatches = max_dispatches
        self.labels: list[str] = []
        self._recorded_objects = []  # pipelines and buffers the recorded commands use
        device._track(self)
        info = vk.ffi.new("VkCommandBufferAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, "commandPool": device._command_pool,
            "level": vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, "commandBufferCount": 1})
        handle = vk.ffi.new("VkCommandBuffer*")
        check(vk.lib.vkAllocateCommandBuffers(device.handle, info, handle), "vkAllocateCommandBuffers")
        self.handle = handle[0]
        fence_info = vk.ffi.new("VkFenceCreateInfo*", {"sType": vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})
        fence = vk.ffi.new("VkFence*")
        check(vk.lib.vkCreateFence(device.handle, fence_info, vk.ffi.NULL, fence), "vkCreateFence")
        self.fence = fence[0]
        if timestamps:
            if device.physical.timestamp_valid_bits == 0:
                raise VulkanError(f"{device.physical.name}: the compute queue has timestampValidBits = 0 "
                                  "(no GPU timestamps)")
            pool_info = vk.ffi.new("VkQueryPoolCreateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, "queryType": vk.VK_QUERY_TYPE_TIMESTAMP,
                "queryCount": 2 * max_dispatches})
            pool = vk.ffi.new("VkQueryPool*")
            check(vk.lib.vkCreateQueryPool(device.handle, pool_info, vk.ffi.NULL, pool), "vkCreateQueryPool")
            self.query_pool = pool[0]

    # -- recording -------------------------------------------------------------------------------------------
    def begin(self):
        if self._state == "pending":
            raise VulkanError(f"{self.name}: cannot re-record while a submission is pending; wait() first")
        if self._state == "recording":
            raise VulkanError(f"{self.name}: already recording")
        check(vk.lib.vkResetCommandBuffer(self.handle, 0), "vkResetCommandBuffer")
        self._release_descriptor_pools()
        self._dispatch_count, self.labels, self._recorded_objects = 0, [], []
        info = vk.ffi.new("VkCommandBufferBeginInfo*", {"sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO})
        check(vk.lib.vkBeginCommandBuffer(self.handle, info), "vkBeginCommandBuffer")
        self._state = "recording"
        if self.query_pool is not None:
            # Reset on the GPU at the start of every submission: each submit writes fresh timestamps.
            vk.lib.vkCmdResetQueryPool(self.handle, self.query_pool, 0, 2 * self.max_dispatches)
        memory_barrier(self.handle)

    def end(self):
        self._require_recording()
        check(vk.lib.vkEndCommandBuffer(self.handle), "vkEndCommandBuffer")
        self._state = "executable"

    class _Recording:
        def __init__(self, commands):
            self.commands = commands

        def __enter__(self):
            self.commands.begin()
            return self.commands

        def __exit__(self, exc_type, *exc):
            if exc_type is None:
                self.commands.end()
            else:  # leave it unusable rather than half recorded
                vk.lib.vkEndCommandBuffer(self.commands.handle)
                self.commands._state = "initial"

    def recording(self):
        """``with commands.recording(): ...`` = begin() ... end()."""
        return CommandBuffer._Recording(self)

    def _require_recording(self):
        if self._state != "recording":
            raise VulkanError(f"{self.name}: not recording (use `with commands.recording():`)")

    def barrier(self):
        """A full memory barrier (rarely needed: dispatches are already separated by barriers)."""
        self._require_recording()
        memory_barrier(self.handle)

    def dispatch(self, pipeline: ComputePipeline, buffers, groups, push=None, label: str | None = None):
        """Record one dispatch. ``buffers``: a list in binding order or a {binding: Buffer} dict. ``groups``: the
        workgroup count (x[, y[, z]]). ``push``: bytes, a numpy array/structured scalar or a tuple of scalars
        (packed by :func:`pack_push_constants`)."""
        self._require_recording()
        if label is not None:
            checks.text(label, "label")
        if not isinstance(pipeline, ComputePipeline) or pipeline.closed:
            raise PipelineInputError(f"{self.name}: dispatch needs an open ComputePipeline, got {pipeline!r}")
        groups = self._check_groups(pipeline, groups)
        bound = self._check_buffers(pipeline, buffers)
        push_data = push_constant_bytes(push)
        if len(push_data) < pipeline.push_block_size:
            # The shader would read garbage past what was pushed.
            given = f"{len(push_data)} bytes of push constants" if push_data else "no push constants"
            raise PipelineInputError(f"{pipeline.name}: {given} for the shader's {pipeline.push_block_size}-byte "
                                     "push-constant block")
        if len(push_data) % 4:
            raise PipelineInputError(f"{pipeline.name}: push constants are {len(push_data)} bytes; Vulkan needs a "
                                     "multiple of 4")
        if len(push_data) > pipeline.push_constant_size:
            raise PipelineInputError(f"{pipeline.name}: {len(push_data)} bytes of push constants exceed the "
                                     f"pipeline's push_constant_size ({pipeline.push_constant_size})")
        if self.query_pool is not None and self._dispatch_count >= self.max_dispatches:
            raise LimitError(f"{self.name}: more than max_dispatches={self.max_dispatches} timed dispatches")

        if self._dispatch_count:
            dispatch_barrier(self.handle)
        vk.lib.vkCmdBindPipeline(self.handle, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        if bound:
            descriptor_set = self._descriptor_set(pipeline, bound)
            vk.lib.vkCmdBindDescriptorSets(self.handle, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1,
                                           descriptor_set, 0, vk.ffi.NULL)
        if push_data:
            data = vk.ffi.new("char[]", push_data)
            self._keep.append(data)
            vk.lib.vkCmdPushConstants(self.handle, pipeline.layout, SHADER_STAGE_COMPUTE, 0, len(push_data), data)
        index = self._dispatch_count
        if self.query_pool is not None:
            vk.lib.vkCmdWriteTimestamp(self.handle, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, self.query_pool, 2 * index)
        vk.lib.vkCmdDispatch(self.handle, *groups)
        if self.query_pool is not None:
            vk.lib.vkCmdWriteTimestamp(self.handle, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.query_pool,
                                       2 * index + 1)
        self._dispatch_count += 1
        self.labels.append(label or pipeline.name)
        self._recorded_objects += [pipeline, *bound.values()]

    def _check_groups(self, pipeline, groups):
        """1 to 3 integer workgroup counts (numpy integers too; 2.7 is refused, not truncated)."""
        if isinstance(groups, (int, np.integer)):
            groups = (groups,)
        if not isinstance(groups, (tuple, list)) or not 1 <= len(groups) <= 3:
            raise VulkanTypeError(f"{pipeline.name}: groups must be 1 to 3 integers, got {groups!r}")
        groups = tuple(checks.integer(g, "groups") for g in groups) + (1,) * (3 - len(groups))
        limits = [int(v) for v in self.device.physical.limits.maxComputeWorkGroupCount]
        if any(g < 1 or g > limit for g, limit in zip(groups, limits)):
            raise LimitError(f"{pipeline.name}: workgroup count {groups} is outside [1, maxComputeWorkGroupCount "
                             f"{tuple(limits)}]")
        return groups

    def _check_buffers(self, pipeline, buffers) -> dict[int, Buffer]:
        if buffers is None:
            buffers = []
        if not isinstance(buffers, (list, tuple, dict)):
            raise VulkanTypeError(f"{pipeline.name}: buffers must be a list in binding order or a "
                                  f"{{binding: Buffer}} dict, got {type(buffers).__name__}")
        if isinstance(buffers, dict):
            bound = dict(buffers)
        else:
            buffers = list(buffers)
            if len(buffers) != len(pipeline.bindings):
                raise PipelineInputError(f"{pipeline.name}: {len(buffers)} buffers given for bindings "
                                         f"{list(pipeline.bindings)}")
            bound = dict(zip(pipeline.bindings, buffers))
        if set(bound) != set(pipeline.bindings):
            raise PipelineInputError(f"{pipeline.name}: buffers for bindings {sorted(bound)} but the pipeline has "
                                     f"bindings {list(pipeline.bindings)}")
        for binding, buffer in bound.items():
            if not isinstance(buffer, Buffer):
                raise PipelineInputError(f"{pipeline.name}: binding {binding} needs a vkcoop Buffer, got "
                                         f"{type(buffer).__name__} (upload arrays with device.upload)")
            if buffer.closed or buffer.device is not self.device:
                raise PipelineInputError(f"{pipeline.name}: binding {binding} ({buffer.name}) is closed or belongs "
                                         "to another device")
        return bound

    def _descriptor_set(self, pipeline, bound):
        device = self.device.handle
        kinds = list(pipeline.bindings.values())
        sizes = [{"type": kind, "descriptorCount": kinds.count(kind)} for kind in sorted(set(kinds))]
        # A named local: cffi frees an array as soon as nothing references it, and a struct field pointing at it
        # does not count (the validation layer saw freed pool sizes when this array was created inline).
        pool_sizes = vk.ffi.new("VkDescriptorPoolSize[]", sizes)
        pool_info = vk.ffi.new("VkDescriptorPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": 1,
            "poolSizeCount": len(sizes), "pPoolSizes": pool_sizes})
        pool = vk.ffi.new("VkDescriptorPool*")
        check(vk.lib.vkCreateDescriptorPool(device, pool_info, vk.ffi.NULL, pool), "vkCreateDescriptorPool")
        self._descriptor_pools.append(pool[0])
        layouts = vk.ffi.new("VkDescriptorSetLayout[]", [pipeline.set_layout])
        allocate_info = vk.ffi.new("VkDescriptorSetAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool[0],
            "descriptorSetCount": 1, "pSetLayouts": layouts})
        descriptor_set = vk.ffi.new("VkDescriptorSet*")
        check(vk.lib.vkAllocateDescriptorSets(device, allocate_info, descriptor_set), "vkAllocateDescriptorSets")
        infos = vk.ffi.new("VkDescriptorBufferInfo[]", [
            {"buffer": bound[b].handle, "offset": 0, "range": WHOLE_SIZE} for b in pipeline.bindings])
        writes = vk.ffi.new("VkWriteDescriptorSet[]", [
            {"sType": vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstSet": descriptor_set[0], "dstBinding": b,
             "descriptorCount": 1, "descriptorType": kind, "pBufferInfo": infos + i}
            for i, (b, kind) in enumerate(pipeline.bindings.items())])
        vk.lib.vkUpdateDescriptorSets(device, len(pipeline.bindings), writes, 0, vk.ffi.NULL)
        self._keep.append(descriptor_set)
        return descriptor_set

    def _release_descriptor_pools(self):
        for pool in self._descriptor_pools:
            vk.lib.vkDestroyDescriptorPool(self.device.handle, pool, vk.ffi.NULL)
        self._descriptor_pools, self._keep = [], []

    # -- submission ------------------------------------------------------------------------------------------
    def submit(self, *, wait: bool = True, timeout_s: float | None = None):
        """Submit the recorded commands; by default wait for them (see :meth:`wait`)."""
        wait = checks.flag(wait, "wait")
        if timeout_s is not None:  # checked before submission: a bad timeout must not strand submitted work
            checks.timeout_seconds(timeout_s, "timeout_s", allow_zero=True)
        if self._state == "pending":
            self.wait(timeout_s)
        if self._state != "executable":
            raise VulkanError(f"{self.name}: nothing recorded to submit (state {self._state})")
        closed = [getattr(o, "name", repr(o)) for o in self._recorded_objects if o.closed]
        if closed:
            raise VulkanError(f"{self.name}: recorded commands use closed objects: {', '.join(closed)}")
        fences = vk.ffi.new("VkFence[]", [self.fence])
        check(vk.lib.vkResetFences(self.device.handle, 1, fences), "vkResetFences")
        handles = vk.ffi.new("VkCommandBuffer[]", [self.handle])
        submit_info = vk.ffi.new("VkSubmitInfo*", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                                   "commandBufferCount": 1, "pCommandBuffers": handles})
        check(vk.lib.vkQueueSubmit(self.device.queue, 1, submit_info, self.fence), f"vkQueueSubmit ({self.name})")
        self._state = "pending"
        if wait:
            self.wait(timeout_s)

    def wait(self, timeout_s: float | None = None):
        """Wait for the fence. Raises FenceTimeoutError after ``timeout_s`` (default: the device's
        ``fence_timeout_s``) and DeviceLostError on VK_ERROR_DEVICE_LOST."""
        timeout_s = self.device.fence_timeout_s if timeout_s is None else checks.timeout_seconds(
            timeout_s, "timeout_s", allow_zero=True)
        if self._state != "pending":
            return
        fences = vk.ffi.new("VkFence[]", [self.fence])
        result = _wait_for_fences(self.device.handle, 1, fences, 1, min(int(timeout_s * 1e9), 2**64 - 1))
        if result == vk.VK_TIMEOUT:
            raise FenceTimeoutError(f"{self.name}: GPU work ({', '.join(self.labels) or 'no dispatches'}) did not "
                                    f"finish within {timeout_s:g} s; it may still be running")
        if result == vk.VK_ERROR_DEVICE_LOST:
            self._state = "lost"
            self.device._lost = True
            raise DeviceLostError(f"{self.name}: the device was lost while running "
                                  f"{', '.join(self.labels) or 'no dispatches'}")
        check(result, f"vkWaitForFences ({self.name})")
        self._state = "executable"

    @property
    def pending(self) -> bool:
        return self._state == "pending"

    # -- timing ----------------------------------------------------------------------------------------------
    def _timestamps(self) -> list[int]:
        """The raw begin and end timestamps of every dispatch of the last submission, masked to the queue's
        timestampValidBits."""
        if self.query_pool is None:
            raise VulkanError(f"{self.name}: created without timestamps=True")
        if self._state != "executable" or self._dispatch_count == 0:
            raise VulkanError(f"{self.name}: no finished submission to time")
        count = 2 * self._dispatch_count
        data = vk.ffi.new("uint64_t[]", count)
        check(vk.lib.vkGetQueryPoolResults(self.device.handle, self.query_pool, 0, count, 8 * count, data, 8,
                                           vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT),
              "vkGetQueryPoolResults")
        return [int(data[i]) for i in range(count)]

    def dispatch_times_ns(self) -> list[float]:
        """GPU time of each dispatch of the last submission, in nanoseconds: 64-bit timestamps masked to the
        queue's timestampValidBits, differenced modulo 2**bits, scaled by timestampPeriod (ns per tick)."""
        return self.span_times_ns([(i, i) for i in range(self._dispatch_count)])

    def span_times_ns(self, spans) -> list[float]:
        """GPU time from the start of dispatch ``first`` to the end of dispatch ``last`` for each (first, last)
        of ``spans``, in nanoseconds: the gaps between dispatches (barriers) count, as they do for the caller."""
        stamps = self._timestamps()
        bits = self.device.physical.timestamp_valid_bits
        period = self.device.physical.timestamp_period_ns
        return [elapsed_ns(stamps[2 * first], stamps[2 * last + 1], bits, period) for first, last in spans]

    def total_time_ns(self) -> float:
        return float(sum(self.dispatch_times_ns()))

    # -- lifetime --------------------------------------------------------------------------------------------
    def close(self):
        device = self.device.handle
        if device is None:
            self.handle = self.fence = self.query_pool = None
            return
        if self._state == "pending":
            vk.lib.vkDeviceWaitIdle(device)  # never free what the GPU may still read
        self._release_descriptor_pools()
        if self.query_pool is not None:
            vk.lib.vkDestroyQueryPool(device, self.query_pool, vk.ffi.NULL)
        if self.fence is not None:
            vk.lib.vkDestroyFence(device, self.fence, vk.ffi.NULL)
        if self.handle is not None:
            handles = vk.ffi.new("VkCommandBuffer[]", [self.handle])
            vk.lib.vkFreeCommandBuffers(device, self.device._command_pool, 1, handles)
        self.handle = self.fence = self.query_pool = None
        self._state = "closed"
        self.device._untrack(self)

    @property
    def closed(self) -> bool:
        return self.handle is None
