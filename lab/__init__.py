"""The GEMM lab: developer tools that measure the kernels of vkcoop (lab/README.md). Not part of the package:
run them from the repository root as ``python -m lab.<tool>``."""
