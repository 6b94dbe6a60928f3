# SPDX-License-Identifier: Apache-2.0
"""The NumPy level: models, layers, decode and the CPU forward.

Every computation is a call into libtrellis; this module checks what the C
functions cannot see (array shapes and dtypes behind raw pointers) and turns
a failing status into TrellisError with the library's message.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union
from ctypes import byref, c_void_p

import numpy as np

from . import _checks, _lib
from ._lifetime import Lifetime
from ._lib import lib


def _status_names():
    names = {}
    for code in range(256):
        name = _lib.text(lib.trellis_status_name(code))
        if name == "TRELLIS_ERR_UNKNOWN":
            break
        names[code] = name
    return names


STATUS_NAMES = _status_names()
STATUS_CODES = {name: code for code, name in STATUS_NAMES.items()}


class TrellisError(RuntimeError):
    """A libtrellis call failed, or its arguments would make it fail.

    str(error) is the library's detail message (trellis_last_error()), or
    the same kind of message for a check made on this side; `status` is the
    trellis_status name ("TRELLIS_ERR_SHAPE"), `code` its number.

    An error about an argument is also the built-in exception Python code
    catches for it: TRELLIS_ERR_INVALID_ARGUMENT, _SHAPE and _BUFFER are
    ValueErrors, TRELLIS_ERR_DTYPE a TypeError, TRELLIS_ERR_NOT_FOUND (a
    layer or tensor name) a LookupError. TrellisError(message, code) makes
    the class that fits the code.
    """

    code: int
    status: str

    def __new__(cls, message: str = "", code: int = 0, *args: object) -> "TrellisError":
        if cls is TrellisError:
            name = STATUS_NAMES.get(int(code), "")
            cls = _ERROR_CLASSES.get(name, TrellisError)
        return super().__new__(cls, message)

    def __init__(self, message: str = "", code: int = 0, *args: object) -> None:
        super().__init__(message)
        self.code = int(code)
        self.status = STATUS_NAMES.get(self.code, "TRELLIS_ERR_UNKNOWN")

    def __reduce__(self):
        return (TrellisError, (str(self), self.code))


class TrellisValueError(TrellisError, ValueError):
    """A TrellisError about an argument's value or shape (also a ValueError)."""


class TrellisTypeError(TrellisError, TypeError):
    """A TrellisError about an argument's dtype (also a TypeError)."""


class TrellisLookupError(TrellisError, LookupError):
    """A TrellisError for a name that is not there (also a LookupError)."""

    def __str__(self) -> str:
        return RuntimeError.__str__(self)


_ERROR_CLASSES = {
    "TRELLIS_ERR_INVALID_ARGUMENT": TrellisValueError,
    "TRELLIS_ERR_SHAPE": TrellisValueError,
    "TRELLIS_ERR_BUFFER": TrellisValueError,
    "TRELLIS_ERR_DTYPE": TrellisTypeError,
    "TRELLIS_ERR_NOT_FOUND": TrellisLookupError,
}


def error(status: str, message: str) -> TrellisError:
    """A TrellisError for a check made on this side (status by name)."""
    return TrellisError(message, STATUS_CODES[status])


def check(status: int) -> None:
    """Raises TrellisError for a failing trellis_status."""
    if status != _lib.OK:
        message = _lib.text(lib.trellis_last_error())
        if not message:
            message = _lib.text(lib.trellis_status_string(status))
        raise TrellisError(message, status)


def call(fn, *args):
    """Calls a status-returning entry point with a clear detail message."""
    lib.trellis_clear_error()
    check(fn(*args))


def _names(fn):
    """{value: name} of an enum whose name function says "invalid" past it."""
    out = {}
    for value in range(256):
        name = _lib.text(fn(value))
        if name != "invalid":
            out[value] = name
    return out


CODEBOOKS = _names(lib.trellis_codebook_name)
PAIR_KINDS = _names(lib.trellis_pair_kind_name) if _lib.HAS_PAIRS else {}
RATE_AXES = _names(lib.trellis_rate_axis_name) if _lib.HAS_PAIRS else {}


def codebook_id(codebook: Union[str, int]) -> int:
    """The trellis_codebook value of a name ("mcg") or of a value (one that
    fits a C int; the library checks it)."""
    if isinstance(codebook, str):
        _checks.c_string("codebook", codebook)
        for value, name in CODEBOOKS.items():
            if name == codebook.lower():
                return value
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "codebook: unknown name '%s' (known: %s)" % (codebook, ", ".join(CODEBOOKS.values())),
        )
    return _checks.integer("codebook", codebook, "int")


def version() -> str:
    """The version string of the loaded C library."""
    return _lib.text(lib.trellis_version_string())


def cuda_built() -> bool:
    """True when the loaded library has the CUDA backend."""
    return bool(lib.trellis_cuda_built())


# The one wording of the two ways CUDA can be missing (the library's and
# the CLI's messages say the same).
NO_CUDA_BUILD = "libtrellis was built without CUDA"
NO_CUDA_DEVICE = "no CUDA device is available"


def no_cuda_message(what: str) -> str:
    """ "<what>: libtrellis was built without CUDA (<library>): ..."."""
    return "%s: %s (%s); rebuild it with the CUDA toolkit (nvcc on PATH)" % (
        what,
        NO_CUDA_BUILD,
        _lib.LIBRARY_PATH,
    )


def cuda_device_count() -> int:
    """Usable CUDA devices as the library sees them (0 without CUDA)."""
    return int(lib.trellis_cuda_device_count())


# numpy dtypes of trellis_tensor_dtype (bf16 as raw uint16 bits, fp8 as
# uint8 bytes, as in the C API).
_TENSOR_NUMPY = {
    "BOOL": np.bool_,
    "U8": np.uint8,
    "I8": np.int8,
    "I16": np.int16,
    "U16": np.uint16,
    "I32": np.int32,
    "U32": np.uint32,
    "I64": np.int64,
    "U64": np.uint64,
    "F16": np.float16,
    "BF16": np.uint16,
    "F32": np.float32,
    "F64": np.float64,
    "F8_E4M3": np.uint8,
    "F8_E5M2": np.uint8,
}


def _tensor_array(t):
    """A copy of a mapped trellis_tensor as a numpy array."""
    name = _lib.TENSOR_DTYPES[t.dtype] if t.dtype < len(_lib.TENSOR_DTYPES) else None
    if name is None:
        raise error(
            "TRELLIS_ERR_DTYPE",
            "tensor '%s': dtype %d has no numpy equivalent" % (_lib.text(t.name), t.dtype),
        )
    shape = tuple(t.shape[i] for i in range(t.ndim))
    out = np.empty(shape, dtype=_TENSOR_NUMPY[name])
    if t.nbytes:
        ctypes.memmove(out.ctypes.data, t.data, t.nbytes)
    return out


def read_safetensors(path: Union[str, os.PathLike]) -> Dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as {name: ndarray} (copies).

    BF16 tensors come back as uint16 bit patterns, F8 ones as uint8 bytes.
    """
    encoded = _checks.path("path", path)
    f = c_void_p()
    call(lib.trellis_file_open, encoded, byref(f))
    try:
        out = {}
        for i in range(lib.trellis_file_tensor_count(f)):
            t = _lib.Tensor()
            call(lib.trellis_file_tensor, f, i, byref(t))
            out[_lib.text(t.name)] = _tensor_array(t)
        return out
    finally:
        lib.trellis_file_close(f)


class Model:
    """An EXL3 checkpoint: one .safetensors file or a model directory.

    The files stay mapped until close() (or the end of a `with` block); the
    layers and arrays handed out before stay usable only while it is open
    (layers) or forever (arrays are copies). Every method may be called
    from several threads at once; close() may be called while other threads
    compute on its layers: it returns at once, new calls raise ValueError,
    and the files are unmapped when the last running call returns.
    """

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self._handle = None
        self._life = Lifetime(lambda: ValueError("libtrellis.Model %r is closed" % self.path))
        encoded = _checks.path("path", path)
        self.path = os.fspath(path)
        handle = c_void_p()
        call(lib.trellis_model_open, encoded, byref(handle))
        self._handle = handle

    def close(self) -> None:
        """Closes the model; the files are unmapped now, or when the calls
        running on other threads return. A second call does nothing."""
        handle = self._handle
        if handle:
            self._life.close(lambda: lib.trellis_model_close(handle))

    @property
    def closed(self) -> bool:
        return self._handle is None or self._life.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):  # not when __init__ failed
            self.close()

    def __repr__(self):
        state = "closed" if self.closed else "%d layers" % len(self)
        return "<libtrellis.Model %r (%s)>" % (self.path, state)

    def _use(self):
        """`with model._use():` around a call into C on the model or on its
        layers' memory: a close() meanwhile unmaps the files only when the
        block ends (ValueError when the model is closed)."""
        return self._life.use()

    def _h(self):
        """The handle (ValueError once closed); C calls made with it belong
        inside `with model._use():`."""
        if self.closed:
            raise ValueError("libtrellis.Model %r is closed" % self.path)
        return self._handle

    def __len__(self) -> int:
        with self._use():
            return int(lib.trellis_model_layer_count(self._handle))

    @property
    def quantization_config(self) -> Optional[Dict[str, Any]]:
        """config.json's quantization_config as a dict, or None."""
        with self._use():
            return self._quantization_config()

    def _quantization_config(self) -> Optional[Dict[str, Any]]:
        q = lib.trellis_model_quant_config(self._handle)
        if not q or not q.contents.present:
            return None
        q = q.contents
        out = {
            "quant_method": _lib.text(q.quant_method),
            "version": _lib.text(q.version),
            "bits": q.bits,
            "head_bits": q.head_bits + 0.5 if _lib.HAS_HALF and q.head_half else q.head_bits,
            "codebook": _lib.text(q.codebook),
            "out_scales": _lib.text(q.out_scales),
            "calibration_rows": q.calibration_rows,
            "calibration_cols": q.calibration_cols,
        }
        if _lib.HAS_PAIRS:
            out["descriptor_sha256"] = _lib.text(q.descriptor_sha256)
        if _lib.HAS_HALF:
            # ExLlamaV3 1.6: 0 (or None for the tie) where config.json has none
            out["mtp_bits"] = q.mtp_bits + 0.5 if q.mtp_half else q.mtp_bits
            out["vision_bits"] = q.vision_bits
            tie = q.tie_word_embeddings
            out["tie_word_embeddings"] = None if tie < 0 else bool(tie)
        return out

    def layer_info(self) -> List[Dict[str, Any]]:
        """One dict per EXL3 layer, in model order: name, k, n, bits,
        codebook, signs ("scaled" or "legacy"), bias, and where the library
        reads paired layers pair and rate_axis ("P24", "n"; None for a
        uniform layer). Read from the headers."""
        with self._use():
            return self._layer_info()

    def _layer_info(self) -> List[Dict[str, Any]]:
        h = self._handle
        rows = []
        for i in range(len(self)):
            if _lib.has("trellis_model_layer_info"):
                info = _lib.LayerInfo()
                call(lib.trellis_model_layer_info, h, i, byref(info))
                legacy = (
                    info.input_signs == _lib.SIGNS_LEGACY or info.output_signs == _lib.SIGNS_LEGACY
                )
                row = {
                    "name": _lib.text(info.name),
                    "k": info.k,
                    "n": info.n,
                    "bits": info.bits + 0.5 if _lib.HAS_HALF and info.half else info.bits,
                    "codebook": CODEBOOKS.get(info.codebook, "invalid"),
                    "signs": "legacy" if legacy else "scaled",
                    "bias": bool(info.has_bias),
                }
                if _lib.HAS_PAIRS:
                    paired = info.pair != 0
                    row["pair"] = PAIR_KINDS.get(info.pair, "invalid") if paired else None
                    row["rate_axis"] = RATE_AXES.get(info.rate_axis, "invalid") if paired else None
            else:
                row = self.layer(i).info()
            rows.append(row)
        return rows

    def layer_names(self) -> List[str]:
        return [row["name"] for row in self.layer_info()]

    def layer(self, key: Union[str, int]) -> "Layer":
        """The layer of a name or an index (0..len - 1), for decode and
        forward."""
        raw = _lib.Layer()
        with self._use():
            if isinstance(key, str):
                name = _checks.c_string("layer", key)
                call(lib.trellis_model_find_layer, self._handle, name, byref(raw))
            else:
                index = _checks.index("layer", key, len(self), "layers")
                call(lib.trellis_model_layer, self._handle, index, byref(raw))
            return Layer(raw.weight, _lib.text(raw.name), self)

    def layers(self) -> List["Layer"]:
        """Every EXL3 layer, in model order (sorted by name with the numbers
        in names compared by value: model.layers.2 before model.layers.10)."""
        return [self.layer(i) for i in range(len(self))]

    def __iter__(self) -> Iterator["Layer"]:
        return iter(self.layers())

    def other_tensor_names(self) -> List[str]:
        """Names of the tensors that are not part of an EXL3 layer."""
        with self._use():
            h = self._handle
            names = []
            for i in range(lib.trellis_model_other_count(h)):
                t = _lib.Tensor()
                call(lib.trellis_model_other, h, i, byref(t))
                names.append(_lib.text(t.name))
            return names

    def tensor(self, name: str) -> np.ndarray:
        """Any tensor of the checkpoint by full name, as a numpy copy."""
        encoded = _checks.c_string("name", name)
        t = _lib.Tensor()
        with self._use():
            call(lib.trellis_model_find_tensor, self._handle, encoded, byref(t))
            return _tensor_array(t)


def tensor_header(model: "Model", name: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """(dtype name, shape) of a checkpoint tensor ("F16", (4096,)), or None
    where the checkpoint has no tensor of that name."""
    encoded = _checks.c_string("name", name)
    t = _lib.Tensor()
    lib.trellis_clear_error()
    with model._use():
        found = lib.trellis_model_find_tensor(model._handle, encoded, byref(t)) == _lib.OK
    if not found:
        return None
    dtype = _lib.TENSOR_DTYPES[t.dtype] if t.dtype < len(_lib.TENSOR_DTYPES) else str(t.dtype)
    return dtype, tuple(t.shape[i] for i in range(t.ndim))


def _refuse_tensor(value, name):
    """A torch tensor given to the NumPy level: TypeError-like TrellisError
    that says what to do (np.asarray would copy a CPU tensor silently and
    fail obscurely on a CUDA one)."""
    mod = type(value).__module__ or ""
    if mod.startswith("torch") and hasattr(value, "detach"):
        where = getattr(getattr(value, "device", None), "type", "?")
        raise error(
            "TRELLIS_ERR_DTYPE",
            "%s: a torch tensor (on %s); the NumPy level takes NumPy arrays: "
            "pass %s.cpu().numpy(), or use libtrellis.EXL3Linear for tensors" % (name, where, name),
        )


def _host_vector(name, value, dtype, length):
    if value is None:
        return None
    _refuse_tensor(value, name)
    a = np.ascontiguousarray(value)
    if a.dtype != dtype or a.shape != (length,):
        raise error(
            "TRELLIS_ERR_SHAPE" if a.dtype == dtype else "TRELLIS_ERR_DTYPE",
            "%s: expected %s [%d], got %s %s%s"
            % (
                name,
                np.dtype(dtype).name,
                length,
                _checks.dtype_text(a.dtype),
                list(a.shape),
                _byte_order_hint(a.dtype),
            ),
        )
    return a


def _byte_order_hint(dtype):
    """For a message about a dtype of the other byte order."""
    if _checks.native_byte_order(dtype):
        return ""
    return (
        " (the byte order is not the machine's: convert with "
        "a.astype(a.dtype.newbyteorder('=')))"
    )


class Layer:
    """One EXL3 linear layer in host memory (a model's mapping or arrays).

    Attributes: name, k (in_features), n (out_features), bits (K: an int,
    or 1.5 / 2.5 / 3.5 for ExLlamaV3 1.6's half-integer rates), codebook
    (name), signs ("scaled" or "legacy"), has_bias; pair, rate_axis and
    bits1 (a pair's record1 K) are None for a uniform layer.
    """

    def __init__(self, weight, name, owner):
        self._weight = weight
        self._owner = owner  # a Model (whose memory it borrows) or arrays
        self.name = name
        self.k = int(weight.k)
        self.n = int(weight.n)
        self.bits = int(weight.bits)
        if _lib.weight_has_pair_fields(weight) and _lib.HAS_HALF and weight.half:
            self.bits += 0.5
        self.codebook = CODEBOOKS.get(weight.codebook, "invalid")
        self.signs = "legacy" if (weight.su or weight.sv) else "scaled"
        self.has_bias = bool(weight.bias)
        self.pair = None
        self.rate_axis = None
        self.bits1 = None
        if _lib.weight_has_pair_fields(weight) and weight.pair:
            self.pair = PAIR_KINDS.get(weight.pair, "invalid")
            self.rate_axis = RATE_AXES.get(weight.rate_axis, "invalid")
            self.bits1 = int(weight.bits1)

    @classmethod
    def from_arrays(
        cls,
        trellis,
        suh=None,
        svh=None,
        *,
        su=None,
        sv=None,
        bias=None,
        codebook="3inst",
        name="layer",
    ):
        """A layer from numpy arrays laid out as a checkpoint stores them:
        trellis int16 [k/16, n/16, 16*K] (K = 1.5 / 2.5 / 3.5: widths 24, 40,
        56), suh fp16 [k] (or legacy su
        int16 [k/16]), svh fp16 [n] (or sv int16 [n/16]), bias fp16 [n] or
        None. The arrays are kept (contiguous copies where needed)."""
        _refuse_tensor(trellis, "trellis")
        t = np.ascontiguousarray(trellis)
        if t.dtype != np.int16 or t.ndim != 3 or _lib.rate_of_width(t.shape[2]) is None:
            raise error(
                "TRELLIS_ERR_SHAPE" if t.dtype == np.int16 else "TRELLIS_ERR_DTYPE",
                "trellis: expected int16 [k/16, n/16, 16*bits], got %s %s%s"
                % (_checks.dtype_text(t.dtype), list(t.shape), _byte_order_hint(t.dtype)),
            )
        k, n = t.shape[0] * 16, t.shape[1] * 16
        bits, half = _lib.rate_of_width(t.shape[2])
        arrays = {
            "trellis": t,
            "suh": _host_vector("suh", suh, np.float16, k),
            "svh": _host_vector("svh", svh, np.float16, n),
            "su": _host_vector("su", su, np.int16, k // 16),
            "sv": _host_vector("sv", sv, np.int16, n // 16),
            "bias": _host_vector("bias", bias, np.float16, n),
        }
        w = _lib.Weight()
        lib.trellis_weight_init(byref(w))
        if half:
            w.half = 1
        w.codebook = codebook_id(codebook)
        w.k = _checks.integer("trellis: k", k, "int64_t")
        w.n = _checks.integer("trellis: n", n, "int64_t")
        w.bits = _checks.integer("trellis: bits", bits, "int")
        for field, a in arrays.items():
            if a is not None:
                setattr(w, field, a.ctypes.data_as(type(getattr(w, field))))
        # the values too (finite scales and bias) where the library can
        if _lib.has("trellis_weight_check_values"):
            call(lib.trellis_weight_check_values, byref(w))
        else:
            call(lib.trellis_weight_validate, byref(w))
        return cls(w, name, arrays)

    def __repr__(self):
        return "<libtrellis.Layer %s k=%d n=%d bits=%d codebook=%s>" % (
            self.name,
            self.k,
            self.n,
            self.bits,
            self.codebook,
        )

    def info(self) -> Dict[str, Any]:
        row = {
            "name": self.name,
            "k": self.k,
            "n": self.n,
            "bits": self.bits,
            "codebook": self.codebook,
            "signs": self.signs,
            "bias": self.has_bias,
        }
        if _lib.HAS_PAIRS:
            row["pair"] = self.pair
            row["rate_axis"] = self.rate_axis
        return row

    def weight(self):
        """The trellis_weight of host pointers (for the C entry points).

        Raises ValueError once the owning model is closed. A C call made
        with it belongs inside `with layer.borrow():`, so that a close() on
        another thread leaves its memory mapped until the call ends."""
        if isinstance(self._owner, Model) and self._owner.closed:
            raise ValueError(self._closed_message())
        return self._weight

    def _closed_message(self):
        return "layer %s: its model %r is closed" % (self.name, self._owner.path)

    def _closed_error(self):
        return ValueError(self._closed_message())

    def borrow(self):
        """`with layer.borrow() as w:` gives the trellis_weight and keeps
        the model's memory mapped until the block ends (ValueError when the
        model is closed)."""
        return _Borrow(self)

    def decode(self, dense: bool = False) -> np.ndarray:
        """W_hat as fp16 [k, n] (bit-exact), or with dense=True the
        original-basis weight as fp32 [k, n] (bias not included)."""
        if dense:
            out = np.empty((self.k, self.n), dtype=np.float32)
            with self.borrow() as w:
                call(lib.trellis_dense_weight, byref(w), out.ctypes.data)
        else:
            out = np.empty((self.k, self.n), dtype=np.float16)
            with self.borrow() as w:
                call(lib.trellis_decode_weight, byref(w), out.ctypes.data)
        return out

    def check_input(self, x: Any) -> Tuple[np.ndarray, int, Tuple[int, ...]]:
        """(x as a contiguous [m, k] array, m, x's leading shape).

        x: float16 or float32 (float64 is cast to float32, the library's
        widest input), of shape [..., k]; a torch tensor is refused with a
        message (the NumPy level takes arrays; EXL3Linear takes tensors)."""
        _refuse_tensor(x, "x")
        a = np.asarray(x)
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        if a.dtype not in (np.float16, np.float32):
            raise error(
                "TRELLIS_ERR_DTYPE",
                "x: dtype %s is not supported for layer %s (expected float16, "
                "float32 or float64%s)"
                % (
                    _checks.dtype_text(a.dtype),
                    self.name,
                    (
                        ", in the machine's byte order: convert with "
                        "x.astype(x.dtype.newbyteorder('='))"
                        if not _checks.native_byte_order(a.dtype)
                        else ""
                    ),
                ),
            )
        if a.ndim < 1 or a.shape[-1] != self.k:
            raise error(
                "TRELLIS_ERR_SHAPE",
                "x: shape %s does not fit layer %s with k = %d (expected "
                "[..., %d])" % (list(a.shape), self.name, self.k, self.k),
            )
        lead = a.shape[:-1]
        a = np.ascontiguousarray(a.reshape(-1, self.k))
        return a, a.shape[0], lead

    def forward(self, x: Any, out_dtype: Any = np.float32, threads: int = 0) -> np.ndarray:
        """y = the layer applied to x on the CPU (the library's reference).

        x: float16, float32 or float64 (cast to float32), of shape [..., k];
        y: out_dtype (float32 or float16), [..., n]. threads: 0 = one per
        core."""
        threads = _checks.integer("threads", threads, "int")
        self.weight()  # ValueError once the model is closed
        a, m, lead = self.check_input(x)
        out_dtype = np.dtype(out_dtype)
        if out_dtype not in (np.float16, np.float32):
            raise error(
                "TRELLIS_ERR_DTYPE",
                "out_dtype: %s is not supported (expected float32 or float16)" % out_dtype.name,
            )
        y = np.empty((m, self.n), dtype=out_dtype)
        if m:
            x_dt = _lib.F16 if a.dtype == np.float16 else _lib.F32
            y_dt = _lib.F16 if out_dtype == np.float16 else _lib.F32
            with self.borrow() as w:
                ws_bytes = lib.trellis_cpu_workspace_size(byref(w), m, threads)
                ws = np.empty(max(ws_bytes, 1), dtype=np.uint8)
                call(
                    lib.trellis_cpu_forward,
                    byref(w),
                    a.ctypes.data,
                    x_dt,
                    m,
                    y.ctypes.data,
                    y_dt,
                    ws.ctypes.data,
                    ws_bytes,
                    threads,
                )
        return y.reshape(lead + (self.n,))


class _Borrow:
    """Layer.borrow(): the weight, with its model held open meanwhile."""

    __slots__ = ("_layer", "_life")

    def __init__(self, layer):
        self._layer = layer
        owner = layer._owner
        self._life = owner._life if isinstance(owner, Model) else None

    def __enter__(self):
        if self._life is not None:
            self._life.enter(self._layer._closed_error)
        return self._layer._weight

    def __exit__(self, *exc):
        if self._life is not None:
            self._life.exit()
        return False


def info(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """What `trellis info` shows, as a dict: path, quantization_config
    (a dict, or None), layers (one dict per EXL3 layer: name, k, n, bits,
    codebook, signs, bias), other_tensors (their count)."""
    with Model(path) as m:
        return {
            "path": m.path,
            "quantization_config": m.quantization_config,
            "layers": m.layer_info(),
            "other_tensors": len(m.other_tensor_names()),
        }


def decode(
    path: Union[str, os.PathLike], layer: Union[str, int], dense: bool = False
) -> np.ndarray:
    """W_hat of one layer as fp16 [k, n] (bit-exact), or its dense fp32
    weight with dense=True, like `trellis decode`."""
    with Model(path) as m:
        return m.layer(layer).decode(dense=dense)


def _cuda_usable() -> bool:
    if not (cuda_built() and cuda_device_count() > 0):
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def forward(
    path: Union[str, os.PathLike],
    layer: Union[str, int],
    x: Any,
    device: str = "auto",
    threads: int = 0,
) -> np.ndarray:
    """y = layer(x) as fp32, like `trellis forward`: x float16, float32 or
    float64 (cast to float32) of shape [..., k], y [..., n]. device "cpu",
    "cuda" (needs PyTorch with CUDA) or "auto" (CUDA when usable, else the
    CPU)."""
    if device not in ("auto", "cpu", "cuda"):
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "device: expected 'auto', 'cpu' or 'cuda', got %r" % (device,),
        )
    if device == "auto":
        device = "cuda" if _cuda_usable() else "cpu"
    with Model(path) as m:
        lay = m.layer(layer)
        if device == "cpu":
            return lay.forward(x, threads=threads)
        try:
            from . import _torch
        except ImportError as exc:
            raise error(
                "TRELLIS_ERR_NO_DEVICE",
                "device 'cuda' needs PyTorch with CUDA (%s)" % exc,
            ) from exc

        return _torch.forward_numpy(lay, x)
