# SPDX-License-Identifier: Apache-2.0
"""EXL3 checkpoints in Hugging Face transformers.

    import libtrellis.hf
    model = AutoModelForCausalLM.from_pretrained(exl3_dir, dtype=torch.float16,
                                                 device_map="cuda")

Importing this module registers the quantization method "exl3" (the
`quant_method` of an EXL3 checkpoint's config.json) with transformers'
quantizer registry (transformers.quantizers.register_quantization_config
and register_quantizer). from_pretrained then builds the architecture from
config.json and, before the weights load, puts an EXL3Linear wherever the
checkpoint has an EXL3 layer (its buffers have the checkpoint's names,
dtypes and shapes, so transformers' loader fills them like any tensor);
Linears stored as fp16 `.weight` stay nn.Linear, and norms, embeddings and
an untied lm_head load as usual. After loading each EXL3Linear makes its
plan on the device it landed on: the CPU (the library's reference forward)
or CUDA, where the layers of the model share one set of plan buffers
(libtrellis.SharedBuffers, model.libtrellis_buffers).

Loading options go in an EXL3Config passed as quantization_config (the
checkpoint's own settings stay): max_m (rows per plan run, default 256;
more rows run in pieces of max_m), flags (libtrellis.PLAN_* bits),
threads (CPU threads, 0 = one per core).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import torch

from . import _core
from ._torch import EXL3Linear, SharedBuffers

try:
    import transformers
    from transformers.quantizers import auto as _auto
    from transformers.quantizers.base import HfQuantizer
    from transformers.utils.quantization_config import QuantizationConfigMixin
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "libtrellis.hf needs Hugging Face transformers (pip install transformers): %s" % exc
    ) from exc

QUANT_METHOD = "exl3"
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# A layer's tensors other than the weight struct's, kept as buffers so the
# model's state_dict is the checkpoint's.
_SUFFIXES = ("trellis", "suh", "svh", "su", "sv", "bias", "mcg", "mul1")
_TORCH_DTYPES = {
    "I16": torch.int16,
    "I32": torch.int32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F32": torch.float32,
}


class EXL3Config(QuantizationConfigMixin):
    """config.json's quantization_config of an EXL3 checkpoint (every key
    kept as it is, so save_pretrained writes it back), plus the loading
    options of libtrellis: max_m, flags, split_k, threads (never saved)."""

    def __init__(
        self,
        bits: Optional[float] = None,
        head_bits: Optional[float] = None,
        codebook: Optional[str] = None,
        version: Optional[str] = None,
        max_m: int = 256,
        flags: int = 0,
        split_k: int = 0,
        threads: int = 0,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("quant_method", None)
        self.quant_method = QUANT_METHOD
        self.bits = bits
        self.head_bits = head_bits
        self.codebook = codebook
        self.version = version
        for key, value in kwargs.items():
            setattr(self, key, value)
        self.max_m = int(max_m)
        self.flags = int(flags)
        self.split_k = int(split_k)
        self.threads = int(threads)
        if self.max_m < 1:
            raise _core.error(
                "TRELLIS_ERR_INVALID_ARGUMENT", "max_m: expected >= 1, got %d" % max_m
            )

    _LOADING = ("max_m", "flags", "split_k", "threads")

    def get_loading_attributes(self) -> Dict[str, Any]:
        return {key: getattr(self, key) for key in self._LOADING}

    def to_dict(self) -> Dict[str, Any]:
        out = super().to_dict()
        for key in self._LOADING:
            out.pop(key, None)
        return out


class EXL3HfQuantizer(HfQuantizer):
    """Loads pre-quantized EXL3 checkpoints (it does not quantize)."""

    requires_calibration = True
    quantization_config: EXL3Config

    def __init__(self, quantization_config: EXL3Config, **kwargs: Any) -> None:
        super().__init__(quantization_config, **kwargs)
        self._names: List[str] = []
        self.buffers: Optional[SharedBuffers] = None

    def validate_environment(self, *args: Any, **kwargs: Any) -> None:
        if not self.pre_quantized:
            raise _core.error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "exl3: libtrellis loads EXL3 checkpoints; it does not quantize a model",
            )
        device_map = kwargs.get("device_map")
        if isinstance(device_map, dict):
            bad = sorted({str(v) for v in device_map.values() if str(v) in ("disk", "meta")})
            if bad:
                raise _core.error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "exl3: device_map places modules on %s; EXL3 layers run on CUDA "
                    "devices and the CPU" % ", ".join(bad),
                )

    def update_dtype(self, dtype: Optional[torch.dtype]) -> torch.dtype:
        if dtype is None or dtype == "auto":
            return torch.float16
        if dtype not in _DTYPES:
            raise _core.error(
                "TRELLIS_ERR_DTYPE",
                "exl3: dtype %s; EXL3 layers take float16, bfloat16 or float32" % (dtype,),
            )
        return dtype

    def _model_dir(self, model: Any, checkpoint_files: Optional[List[str]]) -> str:
        if checkpoint_files:
            return os.path.dirname(os.fspath(checkpoint_files[0]))
        path = getattr(model.config, "name_or_path", None) or getattr(
            model.config, "_name_or_path", None
        )
        if path and os.path.isdir(path):
            return path
        raise _core.error(
            "TRELLIS_ERR_NOT_FOUND",
            "exl3: cannot tell where the checkpoint's files are (config.name_or_path %r)" % path,
        )

    def _process_model_before_weight_loading(self, model: Any, **kwargs: Any) -> Any:
        path = self._model_dir(model, kwargs.get("checkpoint_files"))
        dtype = kwargs.get("dtype") or torch.float16
        cfg = self.quantization_config
        self.buffers = SharedBuffers()
        replaced = []
        with _core.Model(path) as m:
            for name in m.layer_names():
                replaced.append(self._replace(model, m, name, dtype, cfg))
        self._names = replaced
        # an EXL3 head is no copy of the embeddings
        if "lm_head" in replaced and getattr(model.config, "tie_word_embeddings", False):
            model.config.tie_word_embeddings = False
        model.libtrellis_buffers = self.buffers
        return model

    def _replace(self, model: Any, m: "_core.Model", name: str, dtype: Any, cfg: Any) -> str:
        try:
            old = model.get_submodule(name)
        except AttributeError as exc:
            raise _core.error(
                "TRELLIS_ERR_NOT_FOUND",
                "exl3: the checkpoint's layer %s has no module in %s"
                % (name, type(model).__name__),
            ) from exc
        layer = m.layer(name)
        if not isinstance(old, torch.nn.Linear):
            raise _core.error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "exl3: the checkpoint's layer %s is a %s in %s, not a Linear"
                % (name, type(old).__name__, type(model).__name__),
            )
        if (old.in_features, old.out_features) != (layer.k, layer.n):
            raise _core.error(
                "TRELLIS_ERR_SHAPE",
                "exl3: layer %s is %d x %d in the checkpoint, the model's Linear %d x %d"
                % (name, layer.k, layer.n, old.in_features, old.out_features),
            )
        if (old.bias is not None) != layer.has_bias:
            raise _core.error(
                "TRELLIS_ERR_SHAPE",
                "exl3: layer %s %s a bias in the checkpoint, the model's Linear %s"
                % (
                    name,
                    "has" if layer.has_bias else "has no",
                    "has one" if old.bias is not None else "has none",
                ),
            )
        shapes = {}
        for suffix in _SUFFIXES:
            t = _core.tensor_header(m, name + "." + suffix)
            if t is not None:
                dt, shape = t
                shapes[suffix] = (_TORCH_DTYPES[dt], shape)
        mod = EXL3Linear._placeholder(
            layer.weight(),
            name,
            shapes,
            dtype=dtype,
            max_m=cfg.max_m,
            flags=cfg.flags,
            split_k=cfg.split_k,
            threads=cfg.threads,
            split_rows=True,
            contiguous=True,
            buffers=self.buffers,
        )
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, mod)
        return name

    def get_new_dtype(self, converter: Any, param: Any, dtype: Any) -> Any:
        # an EXL3 layer's tensors load as stored (the placeholders carry the
        # checkpoint's dtypes); everything else as transformers decides
        names = getattr(converter, "target_patterns", None) or []
        if any(str(n).rpartition(".")[0] in self._names for n in names):
            return None
        return super().get_new_dtype(converter, param, dtype)

    def _process_model_after_weight_loading(self, model: Any, **kwargs: Any) -> Any:
        for module in model.modules():
            if isinstance(module, EXL3Linear):
                module.prepare(self.buffers)
        return model

    def update_missing_keys(self, model: Any, missing_keys: List[str], prefix: str) -> List[str]:
        return missing_keys

    @property
    def is_trainable(self) -> bool:
        return False

    @property
    def is_qat_trainable(self) -> bool:
        return False

    @property
    def is_compileable(self) -> bool:
        return True

    def is_serializable(self, safe_serialization: Any = None) -> bool:
        return True


def _register() -> None:
    configs = _auto.AUTO_QUANTIZATION_CONFIG_MAPPING
    quantizers = _auto.AUTO_QUANTIZER_MAPPING
    if configs.get(QUANT_METHOD) is EXL3Config:
        return
    # a transformers that knows "exl3" itself gets this implementation
    configs.pop(QUANT_METHOD, None)
    quantizers.pop(QUANT_METHOD, None)
    register_config = getattr(_auto, "register_quantization_config", None)
    register_quantizer = getattr(_auto, "register_quantizer", None)
    if register_config is not None and register_quantizer is not None:
        register_config(QUANT_METHOD)(EXL3Config)
        register_quantizer(QUANT_METHOD)(EXL3HfQuantizer)
    else:  # pragma: no cover - a transformers without the hooks
        configs[QUANT_METHOD] = EXL3Config
        quantizers[QUANT_METHOD] = EXL3HfQuantizer
    # from_pretrained(quantization_config=EXL3Config(max_m=...)) passes
    # its loading options on (transformers keeps a list of such configs)
    kinds = getattr(_auto, "LOADING_ATTRIBUTES_CONFIG_TYPES", None)
    if isinstance(kinds, tuple) and EXL3Config not in kinds:
        _auto.LOADING_ATTRIBUTES_CONFIG_TYPES = kinds + (EXL3Config,)


_register()

__all__ = ["EXL3Config", "EXL3HfQuantizer", "QUANT_METHOD", "transformers"]
