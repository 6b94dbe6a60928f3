# SPDX-License-Identifier: Apache-2.0
"""libtrellis: EXL3 trellis-quantized linear layers.

Python bindings of the libtrellis C library (loaded with ctypes from the
libtrellis.so this package ships). Every computation runs in the library.

NumPy level (no PyTorch needed):
    libtrellis.info(path) -> dict
    libtrellis.decode(path, layer, dense=False) -> ndarray
    libtrellis.forward(path, layer, x, device="auto") -> ndarray
    libtrellis.Model(path): the checkpoint kept mapped; .layer(name) gives a
        libtrellis.Layer with .decode() and .forward()

PyTorch level (imported on first use; torch >= 2.4, the [torch] extra):
    libtrellis.EXL3Linear: a torch.nn.Module running one layer on a CUDA
        device or the CPU
    libtrellis.DeviceWeight: a layer's weight on a device, shareable
    libtrellis.SharedBuffers: the plan buffers the layers of a model share
    torch.ops.libtrellis.exl3_linear: the operator behind EXL3Linear

Hugging Face transformers: `import libtrellis.hf` registers the EXL3
quantizer, after which AutoModelForCausalLM.from_pretrained(exl3_dir)
builds the model with EXL3Linear layers.

Failures raise libtrellis.TrellisError (a RuntimeError): its message is the
library's, its .status the trellis_status name. Errors about an argument
are also ValueError (value, shape), TypeError (dtype) or LookupError (a
name that is not there).
"""

from ._core import (
    CODEBOOKS,
    Layer,
    Model,
    TrellisError,
    TrellisLookupError,
    TrellisTypeError,
    TrellisValueError,
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
    PLAN_NO_DEPENDENT_LAUNCH,
)

__version__ = version()

_TORCH_NAMES = ("DeviceWeight", "EXL3Linear", "Plan", "SharedBuffers", "exl3_linear")


def __getattr__(name: str):
    if name in _TORCH_NAMES:
        try:
            from . import _torch
        except ModuleNotFoundError as exc:
            if exc.name != "torch":
                raise
            raise ImportError(
                "libtrellis.%s needs PyTorch (torch >= 2.4), which is not "
                "installed: install the package's [torch] extra (pip install "
                "'libtrellis[torch]', or pip install './python[torch]' from the "
                "repository) or pip install torch" % name,
                name="torch",
            ) from exc
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
    "PLAN_NO_DEPENDENT_LAUNCH",
    "TrellisError",
    "TrellisLookupError",
    "TrellisTypeError",
    "TrellisValueError",
    "cuda_built",
    "cuda_device_count",
    "decode",
    "forward",
    "info",
    "read_safetensors",
    "version",
]
