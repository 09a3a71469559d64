"""vkcoop: samples, a reference and benchmarks for Vulkan cooperative_matrix2 from Python."""

__version__ = "0.1.0"
