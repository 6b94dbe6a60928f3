"""libtrellis: EXL3 trellis-quantized linear layers.

Python bindings of the libtrellis C library (loaded with ctypes from the
libtrellis.so this package ships). Every computation runs in the library.

NumPy level (no PyTorch needed):
    libtrellis.info(path) -> dict
    libtrellis.decode(path, layer, dense=False) -> ndarray
    libtrellis.forward(path, layer, x, device="auto") -> ndarray
    libtrellis.Model(path): the checkpoint kept mapped; .layer(name) gives a
        libtrellis.Layer with .decode() and .forward()

PyTorch level (imported on first use; torch >= 2.4):
    libtrellis.EXL3Linear: a torch.nn.Module running one layer on CUDA
    libtrellis.DeviceWeight: a layer's weight on a device, shareable
    torch.ops.libtrellis.exl3_linear: the operator behind EXL3Linear

Failures raise libtrellis.TrellisError (a RuntimeError): its message is the
library's, its .status the trellis_status name.
"""

from ._core import (
    CODEBOOKS,
    Layer,
    Model,
    TrellisError,
    cuda_built,
    cuda_device_count,
    decode,
    forward,
    info,
    read_safetensors,
    version,
)
from ._lib import (
    LIBRARY_PATH,
    PLAN_EXACT_WEIGHTS,
    PLAN_FORCE_DECODE,
    PLAN_FORCE_DENSE,
    PLAN_FORCE_GENERIC,
    PLAN_LEGACY_KERNELS,
)

__version__ = version()

_TORCH_NAMES = ("DeviceWeight", "EXL3Linear", "Plan", "exl3_linear")


def __getattr__(name):
    if name in _TORCH_NAMES:
        from . import _torch

        return getattr(_torch, name)
    raise AttributeError("module 'libtrellis' has no attribute %r" % name)


__all__ = [
    "CODEBOOKS",
    "LIBRARY_PATH",
    "Layer",
    "Model",
    "PLAN_EXACT_WEIGHTS",
    "PLAN_FORCE_DECODE",
    "PLAN_FORCE_DENSE",
    "PLAN_FORCE_GENERIC",
    "PLAN_LEGACY_KERNELS",
    "TrellisError",
    "cuda_built",
    "cuda_device_count",
    "decode",
    "forward",
    "info",
    "read_safetensors",
    "version",
]
