"""The array bridges: how each device takes a caller's arrays in place and hands results back in the
caller's type (arrays: numpy and CPU DLPack, and what every bridge shares; cuda: CuPy and CUDA
DLPack arrays such as PyTorch's; opencl: pyopencl arrays). A backend makes its bridge
(``Backend.make_arrays``); the functional calls and gpu_mean.dask read it."""
