# SPDX-License-Identifier: Apache-2.0
"""The PyTorch level: EXL3Linear, the libtrellis::exl3_linear operator, plans
and the buffers the plans of a model share.

An EXL3Linear keeps its layer's tensors as buffers (`trellis`, `suh`/`su`,
`svh`/`sv`, `bias`, the codebook marker), so state_dict() holds them under
their checkpoint names and .to() moves them, and it runs on the device they
are on:

- CPU: the library's reference forward (trellis_cpu_forward, on `threads`
  threads), bit-exact with `trellis forward --device cpu`;
- CUDA: a prepared libtrellis plan on the current stream. Everything a run
  needs besides x and y (rotated input, staging, workspace) is allocated
  when the plan is made, sized with trellis_plans_buffer_sizes over every m
  up to max_m, in a SharedBuffers that the modules of one model share; a
  call allocates only its output, through PyTorch's caching allocator, so
  it can be captured into a CUDA graph.

An eager call goes straight to the library (ctypes); under torch.compile,
and for tensor subclasses, the module calls the custom operator
torch.ops.libtrellis.exl3_linear instead, whose fake implementation gives
the output's shape and dtype.
"""

from __future__ import annotations

import ctypes
import inspect
import itertools
import threading
import weakref
from ctypes import byref, c_void_p
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import numpy as np
import torch

from . import _checks, _core, _lib
from ._core import TrellisError, call, error
from ._lifetime import Lifetime
from ._lib import lib

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(
        "libtrellis: the PyTorch level needs torch >= 2.4 (torch.library."
        "custom_op); this is torch %s" % torch.__version__
    )

_DTYPES = {
    torch.float16: _lib.F16,
    torch.bfloat16: _lib.BF16,
    torch.float32: _lib.F32,
}
_PATHS = {
    _lib.PATH_NONE: "none",
    _lib.PATH_FUSED: "fused",
    _lib.PATH_GENERIC: "generic",
    _lib.PATH_DENSE: "dense",
}
# trellis_weight's pointer fields, and the tensor dtype each one points at.
_FIELD_DTYPES = {
    "trellis": torch.int16,
    "suh": torch.float16,
    "svh": torch.float16,
    "su": torch.int16,
    "sv": torch.int16,
    "bias": torch.float16,
    "trellis1": torch.int16,
}
_FIELDS = tuple(_FIELD_DTYPES)
# Codebook markers a checkpoint stores beside a layer (int32, no field).
_MARKERS = ("mcg", "mul1")
_BUFFER_NAMES = frozenset(_FIELDS + _MARKERS)
# trellis_layout: how a payload's tiles are arranged (the CPU reads the
# checkpoint layout, CUDA plans the lane layout)
_CHECKPOINT = _lib.LAYOUT_CHECKPOINT
_LANES = _lib.LAYOUT_LANES

DeviceLike = Union[str, int, torch.device, None]

# Frees that would break a stream capture in progress (cudaFree) wait here
# until the next free outside a capture.
_deferred: list = []
_deferred_lock = threading.Lock()


def _capturing() -> bool:
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except RuntimeError:
        return False


def _release(fn: Callable, handle: Any) -> None:
    with _deferred_lock:
        if _capturing():
            _deferred.append((fn, handle))
            return
        pending = list(_deferred)
        _deferred.clear()
    for f, h in pending + [(fn, handle)]:
        f(h)


def _cuda_usable() -> bool:
    return torch.cuda.is_available() and _core.cuda_built() and _core.cuda_device_count() > 0


def _device(device: DeviceLike, allow_cpu: bool = True) -> torch.device:
    """A torch.device with an index for CUDA. None or "auto": the current
    CUDA device where libtrellis and torch can use one, else the CPU."""
    if device is None or device == "auto":
        device = "cuda" if _cuda_usable() else "cpu"
    device = torch.device(device)
    if device.type == "cpu" and allow_cpu:
        return device
    if device.type != "cuda":
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "device: libtrellis runs on CUDA devices%s, got %s"
            % (" and the CPU" if allow_cpu else "", device),
        )
    if not _core.cuda_built():
        raise error("TRELLIS_ERR_NO_DEVICE", _core.no_cuda_message("device %s" % device))
    if not torch.cuda.is_available():
        raise error(
            "TRELLIS_ERR_NO_DEVICE",
            "device %s: %s (torch sees none)" % (device, _core.NO_CUDA_DEVICE),
        )
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _dtype(
    name: str,
    dtype: torch.dtype,
    allowed: Tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32),
) -> torch.dtype:
    if dtype not in allowed:
        raise error(
            "TRELLIS_ERR_DTYPE",
            "%s: expected one of %s, got %s" % (name, ", ".join(str(d) for d in allowed), dtype),
        )
    return dtype


if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    _raw_stream = torch._C._cuda_getCurrentRawStream
else:  # pragma: no cover - older torch

    def _raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream


# trellis_run as the eager path calls it: a function object of its own
# (lib["..."] makes a new one) whose arguments are all integers, which ctypes
# converts fastest (the plan and the trellis_buffers by address).
_trellis_run = lib["trellis_run"]
_trellis_run.restype = ctypes.c_int
_trellis_run.argtypes = (c_void_p, c_void_p, ctypes.c_int64, c_void_p, c_void_p, c_void_p)


# ----------------------------------------------------------- weights --


def _meta_copy(weight: "_lib.Weight") -> "_lib.Weight":
    """The weight's scalars (shape, K, codebook, pair fields) without its
    pointers."""
    meta = _lib.Weight.from_buffer_copy(weight)
    for field in _FIELDS:
        if field != "trellis1" or _lib.weight_has_pair_fields(meta):
            setattr(meta, field, None)
    return meta


def _field_shapes(w: "_lib.Weight") -> Dict[str, Tuple[int, ...]]:
    """The element shape of each set pointer field of a host weight."""
    k, n = int(w.k), int(w.n)
    paired = _lib.weight_has_pair_fields(w) and w.pair != 0
    shapes: Dict[str, Tuple[int, ...]] = {}
    if paired:
        # records of 128 channels on the rate axis: [k/16][8][16K] (n) or
        # [8][n/16][16K] (k)
        rate_k = w.rate_axis == 1
        for field, bits in (("trellis", int(w.bits)), ("trellis1", int(w.bits1))):
            shapes[field] = (8, n // 16, 16 * bits) if rate_k else (k // 16, 8, 16 * bits)
    else:
        words = int(lib.trellis_weight_payload_bytes(byref(w))) // 2
        shapes["trellis"] = (k // 16, n // 16, words // ((k // 16) * (n // 16)))
    shapes.update(suh=(k,), svh=(n,), su=(k // 16,), sv=(n // 16,), bias=(n,))
    return shapes


def _host_tensors(weight: "_lib.Weight") -> Dict[str, torch.Tensor]:
    """CPU tensor copies of what a host weight's pointers point at."""
    shapes = _field_shapes(weight)
    out = {}
    for field in _FIELDS:
        if field == "trellis1" and not _lib.weight_has_pair_fields(weight):
            continue
        ptr = getattr(weight, field)
        if not ptr:
            continue
        t = torch.empty(shapes[field], dtype=_FIELD_DTYPES[field])
        ctypes.memmove(t.data_ptr(), ptr, t.numel() * t.element_size())
        out[field] = t
    return out


def _weight_struct(
    meta: "_lib.Weight", tensors: Dict[str, torch.Tensor], layout: int = _CHECKPOINT
) -> "_lib.Weight":
    """meta with its pointers into `tensors` (contiguous, of the field's
    dtype and aligned: _weight_tensors makes them so) and the payload's
    layout."""
    w = _lib.Weight.from_buffer_copy(meta)
    for field, t in tensors.items():
        if field in _FIELD_DTYPES:
            setattr(w, field, ctypes.cast(t.data_ptr(), type(getattr(w, field))))
    w.layout = layout
    return w


def _weight_tensors(buffers: Dict[str, torch.Tensor], name: str) -> Dict[str, torch.Tensor]:
    """The tensors a weight struct points at, from a module's buffers: the
    same tensors where they are contiguous, aligned (16 bytes for the
    payloads, 8 for the rest) and of the field's dtype, else converted
    copies (an F32 bias of a checkpoint becomes fp16, as the library's
    loader does)."""
    out = {}
    for field, want in _FIELD_DTYPES.items():
        t = buffers.get(field)
        if t is None:
            continue
        if t.dtype != want:
            if not (field == "bias" and t.dtype in (torch.float32, torch.bfloat16)):
                raise error(
                    "TRELLIS_ERR_DTYPE",
                    "%s: %s is %s, expected %s" % (name, field, t.dtype, want),
                )
            t = t.to(want)
        align = 16 if field.startswith("trellis") else 8
        if not t.is_contiguous() or t.data_ptr() % align:
            t = t.contiguous().clone()
        out[field] = t
    return out


# ------------------------------------------------------- lane layout --

# The payload fields: each holds one record of the lane layout (a pair: two).
_PAYLOADS = ("trellis", "trellis1")
# {H: permutation} (see _lane_permutation) and {(H, to_lanes, device):
# index tensor}
_lane_perms: Dict[int, np.ndarray] = {}
_lane_indices: Dict[Tuple[int, bool, torch.device], torch.Tensor] = {}
_lane_lock = threading.Lock()
# payload bytes a conversion reads per pass (its temporaries: about 6 times)
_LANE_PASS_BYTES = 8 << 20


def _record_rate(meta: "_lib.Weight", field: str) -> int:
    """H, the half-bits per weight of a payload field's record(s)
    (trl_lanes_rate): 2 K, plus one for a half-integer rate."""
    if field == "trellis1":
        return 2 * int(meta.bits1)
    half = int(meta.half) if meta.struct_size > _lib.WEIGHT_SIZE_V2 else 0
    return 2 * int(meta.bits) + half


def _probe_repack(h: int, payload: np.ndarray) -> np.ndarray:
    """trellis_weight_repack_host of a 128 x 128 layer (8 groups) at H = h
    whose payload is `payload` (uint8, 8 * 128 h bytes): its lane layout."""
    w = _lib.Weight()
    lib.trellis_weight_init(byref(w))
    w.k, w.n, w.bits, w.half = 128, 128, h // 2, h % 2
    # a codebook defined at that rate: MUL1 has the half rates
    w.codebook = _core.codebook_id("mul1" if h % 2 else "mcg")
    ones_k = np.ones(128, np.float16)
    src = np.ascontiguousarray(payload, dtype=np.uint8).view(np.int16)
    out = np.empty_like(src)
    w.trellis = src.ctypes.data_as(type(w.trellis))
    w.suh = ones_k.ctypes.data_as(type(w.suh))
    w.svh = ones_k.ctypes.data_as(type(w.svh))
    call(lib.trellis_weight_repack_host, byref(w), out.ctypes.data_as(type(w.trellis)), None)
    return out.view(np.uint8)


def _nibbles(b: np.ndarray) -> np.ndarray:
    """Nibble i of bytes b: byte i // 2's high half (even i) or low half."""
    return np.stack((b >> 4, b & 15), axis=-1).reshape(-1)


def _lane_permutation(h: int) -> np.ndarray:
    """perm[j]: the checkpoint-layout nibble that nibble j of a group holds
    in the lane layout, at H = h (a group: 128 h bytes, 256 h nibbles).

    The lane layout moves whole nibbles: a lane's span of a tile is 4 H
    bits, its words 32, and bits keep their order inside both
    (docs/FORMAT.md, "The lane layout"). So the library's own repack
    (trellis_weight_repack_host) of three probe groups, whose nibbles hold
    the hex digits of their indices, gives the whole permutation; nothing of
    the layout is written again here. Checked against the library's repack
    for every rate by the tests."""
    with _lane_lock:
        perm = _lane_perms.get(h)
        if perm is None:
            count = 256 * h
            index = np.arange(count)
            perm = np.zeros(count, np.int64)
            for digit in range(3):  # count <= 4096: three hex digits
                probe = (index >> (4 * digit)) & 15
                group = (probe[0::2] << 4 | probe[1::2]).astype(np.uint8)
                lanes = _probe_repack(h, np.tile(group, 8))[: 128 * h]
                perm |= _nibbles(lanes).astype(np.int64) << (4 * digit)
            if not np.array_equal(np.sort(perm), index):
                raise error(
                    "TRELLIS_ERR_INTERNAL",
                    "lane layout at H = %d: the library's repack is no nibble permutation" % h,
                )
            _lane_perms[h] = perm
        return perm


def _lane_index(h: int, to_lanes: bool, device: torch.device) -> torch.Tensor:
    """The gather index of a conversion at H = h, on `device`."""
    key = (h, to_lanes, device)
    index = _lane_indices.get(key)
    if index is None:
        perm = _lane_permutation(h)
        if not to_lanes:
            inverse = np.empty_like(perm)
            inverse[perm] = np.arange(perm.size)
            perm = inverse
        index = torch.from_numpy(perm).to(device)
        _lane_indices[key] = index
    return index


def _convert_layout(
    t: torch.Tensor, h: int, to_lanes: bool, out: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """A payload record array t (int16, contiguous, whole groups of H = h)
    in the lane layout (to_lanes) or back in the checkpoint layout, written
    to `out` (which may be t: in place) or to a new tensor; torch operations
    on t's device and current stream, a few MB at a time."""
    group = 128 * h
    if t.numel() * 2 % group:
        raise error(
            "TRELLIS_ERR_SHAPE",
            "payload of %d bytes is no whole number of %d-byte groups" % (t.numel() * 2, group),
        )
    if out is None:
        out = torch.empty_like(t, memory_format=torch.contiguous_format)
    src = t.view(torch.uint8).reshape(-1, group)
    dst = out.view(torch.uint8).reshape(-1, group)
    index = _lane_index(h, to_lanes, t.device)
    step = max(1, _LANE_PASS_BYTES // group)
    with torch.no_grad():
        for g0 in range(0, src.shape[0], step):
            part = src[g0 : g0 + step]
            nib = torch.stack((part >> 4, part & 15), dim=2).reshape(part.shape[0], 2 * group)
            nib = nib.index_select(1, index).reshape(part.shape[0], group, 2)
            dst[g0 : g0 + step] = nib[:, :, 0] << 4 | nib[:, :, 1]
    return out


class DeviceWeight:
    """A layer's weight tensors on one device (CPU or CUDA) and the
    trellis_weight that points into them, shared by every plan (module)
    that runs it.

    Made by upload() (a copy of a host layer) or from_tensors() (CUDA
    tensors are used in place, kept alive by this object). The memory goes
    back to PyTorch when the last module using it is gone; close() drops
    this object's references.

    The payload (`trellis`, a pair's `trellis1`) is arranged as the device
    reads it (`layout`): in the GPU's lane layout on CUDA (docs/FORMAT.md,
    "The lane layout"), in the checkpoint layout on the CPU. Tensors in
    the other layout are converted, on the device's current stream like any
    torch operation: in place where they are this object's own (`owned`:
    upload()'s copies, a module's buffers, copies made for alignment), so
    the payload is held once; else into a copy this object owns (CUDA
    tensors given to from_tensors(), which stay as the caller gave them)."""

    def __init__(
        self,
        meta: "_lib.Weight",
        tensors: Dict[str, torch.Tensor],
        device: torch.device,
        name: str,
        owned: bool = False,
        layout: int = _CHECKPOINT,
    ) -> None:
        # Plans and CPU runners borrow the tensors for their whole life: each
        # is a use, and close() refuses while any is left.
        self._life = Lifetime(
            lambda: error("TRELLIS_ERR_INVALID_ARGUMENT", "DeviceWeight %s is closed" % name)
        )
        self._meta = meta
        # the tensors as given, to tell whether a module's buffers are still
        # these (weakly: a payload replaced by its copy is not kept)
        self._sources = {f: weakref.ref(t) for f, t in tensors.items()}
        self._tensors = _weight_tensors(tensors, name)
        own = {f for f, t in self._tensors.items() if owned or t is not tensors[f]}
        self.layout = layout
        self._struct = _weight_struct(meta, self._tensors, layout)
        self._view = ctypes.pointer(self._struct)
        self.device = device
        self.name = name
        self.k = int(meta.k)
        self.n = int(meta.n)
        self.bits = int(meta.bits)
        self.codebook = _core.CODEBOOKS.get(meta.codebook, "invalid")
        self.has_bias = "bias" in self._tensors
        lanes = device.type == "cuda" and _lib.has("trellis_weight_repack")
        if lanes and layout != _LANES:
            self._to_lanes(device, own)
        elif not lanes and layout != _CHECKPOINT:
            self._to_checkpoint(own)

    def _payloads(self) -> Dict[str, torch.Tensor]:
        return {f: self._tensors[f] for f in _PAYLOADS if f in self._tensors}

    def _relayout(self, out: Dict[str, torch.Tensor], layout: int) -> None:
        self._tensors.update(out)
        self.layout = layout
        self._struct = _weight_struct(self._meta, self._tensors, layout)
        self._view = ctypes.pointer(self._struct)

    def _to_lanes(self, device: torch.device, in_place: Iterable[str]) -> None:
        """The payload records in the lane layout, by the library's repack
        (see the class)."""
        out = {f: t if f in in_place else torch.empty_like(t) for f, t in self._payloads().items()}
        with torch.cuda.device(device):
            stream = torch.cuda.current_stream(device).cuda_stream
            call(
                lib.trellis_weight_repack,
                self._view,
                out["trellis"].data_ptr(),
                out["trellis1"].data_ptr() if "trellis1" in out else None,
                stream,
            )
        self._relayout(out, _LANES)

    def _to_checkpoint(self, in_place: Iterable[str]) -> None:
        """The payload records back in the checkpoint layout (a CUDA
        module's tensors moved to the CPU)."""
        out = {
            f: _convert_layout(t, _record_rate(self._meta, f), False, t if f in in_place else None)
            for f, t in self._payloads().items()
        }
        self._relayout(out, _CHECKPOINT)

    def _holds(self, tensors: Dict[str, torch.Tensor]) -> bool:
        """True when `tensors` are this weight's: the ones it runs, or the
        ones it was made from."""
        if tensors.keys() != self._sources.keys():
            return False
        return all(self._tensors.get(f) is t or self._sources[f]() is t for f, t in tensors.items())

    @classmethod
    def upload(cls, layer: "_core.Layer", device: DeviceLike = None) -> "DeviceWeight":
        """Copies a host layer (libtrellis.Layer) to a device (default: the
        current CUDA device, else the CPU)."""
        device = _device(device)
        with layer.borrow() as w:  # the model stays mapped while it is read
            host = _host_tensors(w)
            meta = _meta_copy(w)
        tensors = {f: t.to(device) for f, t in host.items()}
        return cls(meta, tensors, device, layer.name, owned=True)

    @classmethod
    def from_tensors(
        cls,
        trellis: Any,
        suh: Any = None,
        svh: Any = None,
        *,
        su: Any = None,
        sv: Any = None,
        bias: Any = None,
        codebook: Union[str, int] = "mcg",
        name: str = "layer",
        device: DeviceLike = None,
    ) -> "DeviceWeight":
        """A weight from tensors laid out as a checkpoint stores them (see
        libtrellis.Layer.from_arrays). CUDA tensors are used in place (a
        copy is made only of a misaligned or non-contiguous one), but for
        the payload, which the plans read from a lane-layout copy (see the
        class; the caller's tensor is left as it is); CPU tensors and numpy
        arrays are copied to `device` (default: the current CUDA device,
        else the CPU)."""
        if trellis is None:
            raise error("TRELLIS_ERR_INVALID_ARGUMENT", "from_tensors: trellis is missing")
        parts = dict(trellis=trellis, suh=suh, svh=svh, su=su, sv=sv, bias=bias)
        on_cuda = [
            isinstance(t, torch.Tensor) and t.is_cuda for t in parts.values() if t is not None
        ]
        if not any(on_cuda):
            host = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in parts.items()}
            layer = _core.Layer.from_arrays(codebook=codebook, name=name, **host)
            return cls.upload(layer, device)
        if not all(on_cuda):
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "from_tensors: mix of CUDA and host tensors; give all on one "
                "CUDA device or all on the host",
            )
        device = _device(device if device is not None else parts["trellis"].device, False)
        tensors = {}
        for field, t in parts.items():
            if t is None:
                continue
            if t.device != device:
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "%s: on %s, expected %s" % (field, t.device, device),
                )
            if t.dtype != _FIELD_DTYPES[field]:
                raise error(
                    "TRELLIS_ERR_DTYPE",
                    "%s: expected %s, got %s" % (field, _FIELD_DTYPES[field], t.dtype),
                )
            tensors[field] = t
        t = tensors["trellis"]
        if t.dim() != 3 or _lib.rate_of_width(t.shape[2]) is None:
            raise error(
                "TRELLIS_ERR_SHAPE",
                "trellis: expected [k/16, n/16, 16*K], got %s" % list(t.shape),
            )
        meta = _lib.Weight()
        lib.trellis_weight_init(byref(meta))
        meta.k, meta.n = t.shape[0] * 16, t.shape[1] * 16
        meta.bits, meta.half = _lib.rate_of_width(t.shape[2])
        meta.codebook = _core.codebook_id(codebook)
        weight = cls(meta, tensors, device, name)
        call(lib.trellis_weight_validate, weight._view)
        for field in ("suh", "svh", "bias", "su", "sv"):
            length = {"suh": meta.k, "su": meta.k // 16, "sv": meta.n // 16}.get(field, meta.n)
            if field in tensors and tuple(tensors[field].shape) != (length,):
                raise error(
                    "TRELLIS_ERR_SHAPE",
                    "%s: expected [%d], got %s" % (field, length, list(tensors[field].shape)),
                )
        return weight

    @property
    def _plans(self) -> int:
        """The plans and CPU runners using this weight now."""
        return self._life.uses

    def close(self) -> None:
        """Drops this object's tensors. Every module using this weight must
        be closed first (RuntimeError otherwise)."""

        def release() -> None:
            self._tensors = {}
            self._view = None

        self._life.close(
            release,
            refuse=lambda uses: "DeviceWeight %s: still used by %d plan(s); close them first"
            % (self.name, uses),
        )

    def __repr__(self) -> str:
        return "<libtrellis.DeviceWeight %s k=%d n=%d bits=%d %s on %s>" % (
            self.name,
            self.k,
            self.n,
            self.bits,
            self.codebook,
            self.device,
        )


# The weight's arguments of EXL3Linear.from_tensors: DeviceWeight.from_tensors's
# parameters, so that signature is written once.
_DEVICE_WEIGHT_ARGS = tuple(inspect.signature(DeviceWeight.from_tensors).parameters)


# ------------------------------------------------------------ buffers --


class SharedBuffers:
    """One set of plan buffers per CUDA device for plans that run one after
    another on one stream (the layers of a model): each buffer as large as
    the largest that any member plan needs at any m up to its max_m
    (trellis_plans_buffer_sizes), instead of one set per plan.

    Modules made with the same SharedBuffers must not run at the same time
    on different streams; give each concurrent module its own (the
    default). When a plan joins that needs more, the buffers are replaced
    by larger ones: make every module of a set before capturing CUDA
    graphs that run them."""

    _KEYS = ("rotated", "input_f16", "output_f16", "workspace")

    def __init__(self) -> None:
        self._by_device: Dict[torch.device, Dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _entry(self, device: torch.device) -> Dict[str, Any]:
        e = self._by_device.get(device)
        if e is None:
            buffers = _lib.Buffers()
            lib.trellis_buffers_init(byref(buffers))
            e = {
                "buffers": buffers,
                "need": dict.fromkeys(self._KEYS, 0),
                "storage": {},
                "plans": weakref.WeakSet(),
            }
            self._by_device[device] = e
        return e

    def _join(self, plan: "Plan") -> "_lib.Buffers":
        """Adds a plan, grows the device's buffers to its needs and returns
        the trellis_buffers its runs pass (one struct per device, updated in
        place when the buffers grow)."""
        need = plan.buffer_needs()
        with self._lock:
            e = self._entry(plan.device)
            e["plans"].add(plan)
            grow = {k: v for k, v in need.items() if v > e["need"][k]}
            if grow:
                e["need"].update(grow)
                with torch.cuda.device(plan.device):
                    for key in grow:
                        t = torch.empty(e["need"][key], dtype=torch.uint8, device=plan.device)
                        e["storage"][key] = t
                        setattr(e["buffers"], key, t.data_ptr())
                        setattr(e["buffers"], key + "_bytes", t.numel())
            return e["buffers"]

    def bytes(self, device: DeviceLike = None) -> int:
        """The bytes of the buffers held for `device` (all devices: None)."""
        entries = (
            self._by_device.values()
            if device is None
            else [self._by_device.get(torch.device(device), {"need": {}})]
        )
        return sum(sum(e["need"].values()) for e in entries)

    def sizes(self, device: DeviceLike) -> Dict[str, int]:
        """Each buffer's bytes on `device`: the largest over the member
        plans and every m up to their max_m."""
        e = self._by_device.get(torch.device(device))
        return dict(e["need"]) if e else dict.fromkeys(self._KEYS, 0)

    def plans(self, device: DeviceLike) -> list:
        e = self._by_device.get(torch.device(device))
        return list(e["plans"]) if e else []

    def __repr__(self) -> str:
        parts = ["%s: %d bytes" % (d, self.bytes(d)) for d in self._by_device]
        return "<libtrellis.SharedBuffers %s>" % (", ".join(parts) or "empty")


# The needs of plans alike in everything trellis_plan_create reads: a
# model's layers come in a few kinds, so a model pays a few query loops.
_needs_cache: Dict[tuple, Dict[str, int]] = {}


def _plans_sizes(plans: Iterable["Plan"], m: int) -> "_lib.BufferSizes":
    live = [p._live() for p in plans]  # held: no plan is destroyed meanwhile
    arr = (c_void_p * max(len(live), 1))(*[h.ptr for h in live])
    sizes = _lib.BufferSizes()
    if _lib.has("trellis_plans_buffer_sizes"):
        call(lib.trellis_plans_buffer_sizes, arr, len(live), int(m), byref(sizes))
        return sizes
    for h in live:  # a library before 0.3.0
        one = _lib.BufferSizes()
        call(lib.trellis_plan_query, h.ptr, int(m), byref(one))
        for key in SharedBuffers._KEYS:
            field = key + "_bytes"
            setattr(sizes, field, max(getattr(sizes, field), getattr(one, field)))
    return sizes


_plan_ids = itertools.count(1)
_plans: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()


class _PlanHandle:
    """A C plan, destroyed when the last reference to this object goes.

    Its Plan holds one until close(); every call into C that uses the plan
    holds another in a local variable for the call's length, so a close()
    while other threads run the plan destroys it when the last of those
    calls returns (ctypes releases the GIL during a call). This costs a
    run nothing, where counting uses under a lock (_lifetime.Lifetime,
    which the models, weights and CPU layers keep) cost the eager path
    about 0.7 us per call."""

    __slots__ = ("ptr", "weight")

    def __init__(self, ptr: int, weight: "DeviceWeight") -> None:
        self.ptr = ptr
        self.weight = weight  # borrowed (a use of its Lifetime) until then

    def __del__(self) -> None:
        try:
            _release(lib.trellis_plan_destroy, self.ptr)
            self.weight._life.exit()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


class Plan:
    """A prepared libtrellis plan of a CUDA DeviceWeight.

    Runs x [..., k] (at most max_m rows, the plan's input dtype, contiguous,
    on its device) into y [..., n] of its output dtype on the current
    stream. Its buffers come from `buffers` (a SharedBuffers; a private one
    by default)."""

    def __init__(
        self,
        weight: DeviceWeight,
        max_m: int,
        dtype: torch.dtype = torch.float16,
        out_dtype: Optional[torch.dtype] = None,
        compute_dtype: torch.dtype = torch.float16,
        flags: int = 0,
        split_k: int = 0,
        buffers: Optional[SharedBuffers] = None,
        split_rows: bool = False,
    ) -> None:
        # [the _PlanHandle] while open; close() empties it
        self._box: list = [None]
        self.eager: Callable[[torch.Tensor], torch.Tensor] = _closed_plan_call
        self.weight = weight
        self.device = weight.device
        if self.device.type != "cuda":
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "Plan: the weight %s is on %s; plans run on CUDA devices"
                % (weight.name, self.device),
            )
        self.index = self.device.index
        self.max_m = _checks.integer("max_m", max_m, "int64_t")
        self.dtype = _dtype("dtype", dtype)
        self.out_dtype = _dtype("out_dtype", out_dtype or dtype)
        self.compute_dtype = _dtype("compute_dtype", compute_dtype, (torch.float16, torch.bfloat16))
        self.flags = _checks.integer("flags", flags, "uint32_t")
        self.split_k = _checks.integer("split_k", split_k, "int")
        self.split_rows = bool(split_rows)
        self.k, self.n = weight.k, weight.n
        desc = _lib.PlanDesc()
        lib.trellis_plan_desc_init(byref(desc))
        desc.max_m = self.max_m
        desc.input_dtype = _DTYPES[self.dtype]
        desc.output_dtype = _DTYPES[self.out_dtype]
        desc.compute_dtype = _DTYPES[self.compute_dtype]
        desc.flags = self.flags
        desc.split_k = self.split_k
        plan = c_void_p()
        # The plan borrows the weight's memory until it is destroyed.
        weight._life.enter()
        try:
            with torch.cuda.device(self.device):
                call(lib.trellis_plan_create, weight._view, byref(desc), byref(plan))
        except BaseException:
            weight._life.exit()
            raise
        handle = _PlanHandle(int(plan.value or 0), weight)
        with torch.cuda.device(self.device):
            call(lib.trellis_plan_prepare, handle.ptr)  # on failure the handle goes
        self._box[0] = handle
        self.buffers = buffers if buffers is not None else SharedBuffers()
        self._buffers_struct = self.buffers._join(self)
        self.id = next(_plan_ids)
        _plans[self.id] = self
        self.eager = _eager_plan_call(self)

    def _kind(self) -> tuple:
        w = self.weight._struct
        paired = _lib.weight_has_pair_fields(w)
        pair = (int(w.pair), int(w.rate_axis), int(w.bits1), int(w.half)) if paired else ()
        return (
            int(w.k),
            int(w.n),
            int(w.bits),
            int(w.codebook),
            bool(w.su),
            bool(w.sv),
            bool(w.bias),
            pair,
            self.max_m,
            self.dtype,
            self.out_dtype,
            self.compute_dtype,
            self.flags,
            self.split_k,
            self.index,
        )

    def buffer_needs(self) -> Dict[str, int]:
        """Each buffer's largest size over every m up to max_m."""
        key = self._kind()
        need = _needs_cache.get(key)
        if need is None:
            need = dict.fromkeys(SharedBuffers._KEYS, 0)
            for m in range(1, self.max_m + 1):
                sizes = _plans_sizes([self], m)
                for k in need:
                    need[k] = max(need[k], getattr(sizes, k + "_bytes"))
            _needs_cache[key] = need
        return dict(need)

    def path(self, m: int) -> str:
        """The path ("fused", "generic" or "dense") a run of m rows takes."""
        m = _checks.integer("m", m, "int64_t")
        sizes = _lib.BufferSizes()
        h = self._live()
        call(lib.trellis_plan_query, h.ptr, m, byref(sizes))
        return _PATHS.get(sizes.path, str(sizes.path))

    @property
    def closed(self) -> bool:
        return self._box[0] is None

    def _closed_error(self) -> TrellisError:
        return error(
            "TRELLIS_ERR_INVALID_ARGUMENT", "libtrellis plan of %s is closed" % self.weight.name
        )

    def _live(self) -> _PlanHandle:
        """The plan's handle, for a call into C to hold while it runs."""
        h = self._box[0]
        if h is None:
            raise self._closed_error()
        return h

    def check(self, x: torch.Tensor) -> int:
        """Raises TrellisError unless x fits a run: a contiguous tensor on
        the plan's device, of its input dtype, [..., k] with at most max_m
        rows in all (any number with split_rows). Returns the rows. Pure
        Python on shapes, so the fake implementation runs it while
        torch.compile traces."""
        return _check_input(self, x, self.device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """y = layer(x): checked, allocated, run (the eager path)."""
        return self.eager(x)

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        """What the eager path leaves to this: x refused by its quick
        checks (the full check says why, or passes x with split_rows), no
        rows, more than max_m rows, or a closed plan."""
        h = self._live()
        rows = self.check(x)
        y = torch.empty(tuple(x.shape)[:-1] + (self.n,), dtype=self.out_dtype, device=self.device)
        if rows:
            self._run(h.ptr, x, y, rows)
        return y

    def _rerun(self, st: int, x: torch.Tensor, y: torch.Tensor, m: int) -> None:
        # A run fails where another device is current: run it again there;
        # any other failure is raised with the library's message.
        if torch.cuda.current_device() == self.index:
            _core.check(st)
        h = self._live()
        with torch.cuda.device(self.device):
            self._run(h.ptr, x, y, m)

    def run(self, x: torch.Tensor, y: torch.Tensor, m: Optional[int] = None) -> torch.Tensor:
        """y = layer(x) on the current stream of the plan's device (x and y
        checked, contiguous, m = x.numel() / k rows; more than max_m rows
        run in max_m-row pieces)."""
        if m is None:
            m = x.numel() // self.k
        if m == 0:
            return y
        h = self._live()  # held until the run returns
        return self._run(h.ptr, x, y, m)

    def _run(self, plan: int, x: torch.Tensor, y: torch.Tensor, m: int) -> torch.Tensor:
        xp, yp = x.data_ptr(), y.data_ptr()
        step = self.max_m
        bufs = ctypes.addressof(self._buffers_struct)
        xs, ys = self.k * x.element_size(), self.n * y.element_size()
        done = 0
        while done < m:
            rows = m - done if m - done < step else step
            args = (plan, xp + done * xs, rows, yp + done * ys, bufs)
            st = _trellis_run(*args, _raw_stream(self.index))
            if st:
                if torch.cuda.current_device() == self.index:
                    _core.check(st)
                with torch.cuda.device(self.device):
                    call(_trellis_run, *args, _raw_stream(self.index))
            done += rows
        return y

    def close(self) -> None:
        """Destroys the plan (the buffers stay with their SharedBuffers),
        now or, while other threads run it, when the last of those runs
        returns."""
        self._box[0] = None
        self.eager = _closed_plan_call

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _closed_plan_call(x: torch.Tensor) -> torch.Tensor:
    raise error("TRELLIS_ERR_INVALID_ARGUMENT", "libtrellis plan is closed")


def _eager_plan_call(plan: Plan) -> Callable[[torch.Tensor], torch.Tensor]:
    """The eager path of a plan: y = layer(x) with everything that does not
    change between calls bound once (shape, dtypes, device, the plan's and
    the buffers' addresses, the entry point), so a call costs the checks
    that protect the library (x's dtype, device, contiguity, width and
    rows: a few tensor queries), the output's allocation, one ctypes call
    and the stream's lookup. What the quick checks refuse, and a failed
    run, goes to the plan's own methods, which say why.

    The function holds the plan weakly and its handle through the plan's
    box, so neither a module nor a tracer that keeps it keeps the plan
    alive after close()."""
    box, k, n, max_m = plan._box, plan.k, plan.n, plan.max_m
    dtype, out_dtype, index = plan.dtype, plan.out_dtype, plan.index
    same_dtype = out_dtype is dtype
    bufs = ctypes.addressof(plan._buffers_struct)
    run, stream = _trellis_run, _raw_stream
    ref = weakref.ref(plan)

    def other(x: torch.Tensor) -> Any:
        p = ref()
        if p is None:
            return _closed_plan_call(x)
        return p._call(x)

    def eager(x: torch.Tensor) -> torch.Tensor:
        h = box[0]  # held until the run returns
        shape = x.shape
        if (
            h is None
            or x.dtype is not dtype
            or x.get_device() != index
            or not x.is_contiguous()
            or not shape
            or shape[-1] != k
        ):
            return other(x)
        m = x.numel() // k
        if not 0 < m <= max_m:
            return other(x)
        size = tuple(shape)[:-1] + (n,)
        y = x.new_empty(size) if same_dtype else x.new_empty(size, dtype=out_dtype)
        st = run(h.ptr, x.data_ptr(), m, y.data_ptr(), bufs, stream(index))
        if st:
            p = ref()
            if p is not None:
                p._rerun(st, x, y, m)
            else:
                _core.check(st)
        return y

    return eager


class CpuRunner:
    """The CPU reference forward of a CPU DeviceWeight (trellis_cpu_forward
    on `threads` threads, 0 = one per core)."""

    def __init__(
        self,
        weight: DeviceWeight,
        dtype: torch.dtype = torch.float16,
        out_dtype: Optional[torch.dtype] = None,
        threads: int = 0,
        max_m: int = 0,
        split_rows: bool = True,
    ) -> None:
        self._plan = None
        # Runs are uses: close() lets go of the weight when the last returns.
        self._life = Lifetime(
            lambda: error(
                "TRELLIS_ERR_INVALID_ARGUMENT", "libtrellis CPU layer %s is closed" % weight.name
            )
        )
        self.weight = weight
        self.device = torch.device("cpu")
        self.index = -1
        self.dtype = _dtype("dtype", dtype)
        self.out_dtype = _dtype("out_dtype", out_dtype or dtype)
        self.threads = _checks.integer("threads", threads, "int")
        self.max_m = _checks.integer("max_m", max_m, "int64_t")
        self.split_rows = split_rows
        self.k, self.n = weight.k, weight.n
        # the runner borrows the weight's memory until it is closed
        weight._life.enter()
        try:
            # the values, once (the forward does not scan them)
            call(lib.trellis_weight_check_values, weight._view)
        except BaseException:
            weight._life.exit()
            raise
        self._plan = weight._view
        self.id = next(_plan_ids)
        _plans[self.id] = self

    def path(self, m: int) -> str:
        return "cpu"

    @property
    def eager(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The eager path (this runner's __call__: the forward dominates)."""
        return self.__call__

    @property
    def closed(self) -> bool:
        return self._plan is None or self._life.closed

    def _live(self) -> Any:
        if self.closed:
            raise self._life._closed_error()
        return self._plan

    def check(self, x: torch.Tensor) -> int:
        return _check_input(self, x, self.device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x, self.device)
        y = torch.empty(x.shape[:-1] + (self.n,), dtype=self.out_dtype)
        return self.run(x, y)

    def run(self, x: torch.Tensor, y: torch.Tensor, m: Optional[int] = None) -> torch.Tensor:
        if m is None:
            m = x.numel() // self.k
        if m == 0:
            return y
        with self._life.use():
            w = self._plan
            ws_bytes = int(lib.trellis_cpu_workspace_size(w, m, self.threads))
            ws = torch.empty(max(ws_bytes, 1), dtype=torch.uint8)
            _core.call(
                lib.trellis_cpu_forward,
                w,
                x.data_ptr(),
                _DTYPES[x.dtype],
                m,
                y.data_ptr(),
                _DTYPES[y.dtype],
                ws.data_ptr(),
                ws_bytes,
                self.threads,
            )
        return y

    def close(self) -> None:
        """Lets go of the weight, now or when the runs of other threads
        return."""

        def release() -> None:
            if self._plan is not None:
                self._plan = None
                self.weight._life.exit()

        self._life.close(release)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _check_input(runner: Any, x: Any, device: torch.device) -> int:
    name = runner.weight.name
    if not isinstance(x, torch.Tensor):
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "%s: x is a %s, not a tensor" % (name, type(x).__name__),
        )
    if x.device != device:
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "%s: x is on %s, the layer on %s (move one with .to())" % (name, x.device, device),
        )
    if x.dtype != runner.dtype:
        raise error(
            "TRELLIS_ERR_DTYPE",
            "%s: x is %s, the layer takes %s" % (name, x.dtype, runner.dtype),
        )
    if x.dim() < 1 or x.shape[-1] != runner.k:
        raise error(
            "TRELLIS_ERR_SHAPE",
            "%s: x has shape %s, expected [..., %d]" % (name, list(x.shape), runner.k),
        )
    rows = x.numel() // runner.k
    if runner.max_m and rows > runner.max_m and not runner.split_rows:
        raise error(
            "TRELLIS_ERR_SHAPE",
            "%s: x has %d rows (shape %s), above max_m = %d (make the "
            "layer with a larger max_m)" % (name, rows, list(x.shape), runner.max_m),
        )
    if not x.is_contiguous():
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "%s: x is not contiguous (shape %s, strides %s); call "
            ".contiguous() first" % (name, list(x.shape), list(x.stride())),
        )
    return rows


def _live_plan(plan_id: Any) -> Any:
    plan_id = int(plan_id)  # a constant, even where a tracer made it symbolic
    plan = _plans.get(plan_id)
    if plan is None or plan.closed:
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "exl3_linear: plan %d is closed or was never made" % plan_id,
        )
    return plan


@torch.library.custom_op("libtrellis::exl3_linear", mutates_args=())
def exl3_linear(x: torch.Tensor, plan_id: int, n: int, out_dtype: torch.dtype) -> torch.Tensor:
    """y [..., n] = the EXL3 layer of plan `plan_id` applied to x [..., k].

    plan_id names a live plan (EXL3Linear makes them, on CUDA or the CPU);
    n and out_dtype are the plan's, given here so the output is described
    by the arguments alone. x must pass the plan's check (TrellisError
    otherwise)."""
    plan = _live_plan(plan_id)
    plan.check(x)
    y = torch.empty((*x.shape[:-1], n), dtype=out_dtype, device=x.device)
    return plan.run(x, y)


@exl3_linear.register_fake
def _exl3_linear_fake(x, plan_id, n, out_dtype):
    _live_plan(plan_id).check(x)
    return x.new_empty((*x.shape[:-1], n), dtype=out_dtype)


_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


# ------------------------------------------------------------- module --


class EXL3Linear(torch.nn.Module):
    """An EXL3 linear layer as a torch module: y = x W + bias.

    EXL3Linear(path, name) loads layer `name` of a model file or directory;
    EXL3Linear(model, name) takes an open libtrellis.Model,
    EXL3Linear(layer) a libtrellis.Layer, EXL3Linear(weight) a DeviceWeight
    (its tensors shared with other modules). EXL3Linear.from_tensors and
    EXL3Linear.from_model build from tensors and from a whole checkpoint.

    The layer's tensors are buffers under their checkpoint names
    (`trellis`, `suh` or legacy `su`, `svh` or `sv`, `bias`, the codebook
    marker `mcg`/`mul1`): state_dict() and load_state_dict() round-trip
    them, and .to(device) moves them and re-plans. On a CUDA device a
    forward runs a libtrellis plan; on the CPU the library's reference
    forward (`threads` threads, 0 = one per core). .to(dtype) (or .half(),
    .bfloat16(), .float()) changes the dtype of x and y, never the stored
    tensors'.

    The payload is held once. On CUDA the `trellis` buffer (a pair's
    `trellis1` too) is the tensor the plan reads, in the GPU's lane layout
    (docs/FORMAT.md): it is repacked in place when the module plans there,
    and a tensor given to the module as that buffer (load_state_dict with
    assign=True, an assignment, transformers' loader) becomes the
    module's. state_dict() gives the checkpoint layout (converted copies of
    the payload; the other tensors as they are), load_state_dict() takes
    it, and .to("cpu") converts back.

    device: "cuda", "cuda:N", "cpu", or None (the current CUDA device where
    one is usable, else the CPU). max_m: the most rows one forward may pass
    (the CUDA buffers are sized for it; more is an error unless
    split_rows=True, which runs them max_m rows at a time). dtype: x's
    dtype (float16, bfloat16 or float32); out_dtype: y's (default dtype);
    compute_dtype: the rotated input's on CUDA (float16, the format's, or
    bfloat16). flags: libtrellis.PLAN_* bits. buffers: a SharedBuffers for
    the CUDA plan's buffers, shared with the other modules given it (the
    layers of one model, which run in sequence); each module gets its own
    by default.

    forward(x): x of shape [..., in_features], contiguous, on the module's
    device, of its dtype; y [..., out_features].
    """

    def __init__(
        self,
        source: Any,
        name: Optional[str] = None,
        *,
        max_m: int = 128,
        dtype: torch.dtype = torch.float16,
        out_dtype: Optional[torch.dtype] = None,
        compute_dtype: torch.dtype = torch.float16,
        device: DeviceLike = None,
        flags: int = 0,
        split_k: int = 0,
        buffers: Optional[SharedBuffers] = None,
        threads: int = 0,
        split_rows: bool = False,
        contiguous: bool = False,
    ) -> None:
        super().__init__()
        self._runner: Any = None
        self._eager: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
        self._stale = True
        self._device_weight: Optional[DeviceWeight] = None
        self._layout = _CHECKPOINT  # of the payload buffers
        markers: Dict[str, torch.Tensor] = {}
        max_m = _checks.integer("max_m", max_m, "int64_t")
        if max_m < 1:
            raise error("TRELLIS_ERR_INVALID_ARGUMENT", "max_m: expected >= 1, got %d" % max_m)
        if isinstance(source, DeviceWeight):
            weight = source
            if device is not None and _device(device) != weight.device:
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "device: the weight is on %s, not %s" % (weight.device, device),
                )
            meta, tensors, layer_name = weight._meta, weight._tensors, weight.name
            self._device_weight = weight
            self._layout = weight.layout
        else:
            if isinstance(source, _core.Layer):
                layer, model = source, None
            elif isinstance(source, _core.Model):
                if name is None:
                    raise TypeError("EXL3Linear(model, name): the layer name is missing")
                layer, model = source.layer(name), source
            elif isinstance(source, torch.Tensor):
                raise TypeError(
                    "EXL3Linear(source): source is a tensor; use "
                    "EXL3Linear.from_tensors(trellis, suh, svh, ...)"
                )
            else:
                if name is None:
                    raise TypeError("EXL3Linear(path, name): the layer name is missing")
                model = _core.Model(source)
                layer = model.layer(name)
            try:
                device = _device(device)
                with layer.borrow() as w:  # the model stays mapped while read
                    meta = _meta_copy(w)
                    host = _host_tensors(w)
                tensors = {f: t.to(device) for f, t in host.items()}
                if model is not None:
                    markers = _markers_of(model, layer.name, device)
            finally:
                if model is not None and model is not source:
                    model.close()
            layer_name = layer.name
        self._meta = meta
        self.layer_name = layer_name
        self.in_features = int(meta.k)
        self.out_features = int(meta.n)
        self.bits = int(meta.bits)
        self.codebook = _core.CODEBOOKS.get(meta.codebook, "invalid")
        self.max_m = max_m
        self.dtype = _dtype("dtype", dtype)
        self.out_dtype = _dtype("out_dtype", out_dtype or dtype)
        self.compute_dtype = _dtype("compute_dtype", compute_dtype, (torch.float16, torch.bfloat16))
        self.flags = _checks.integer("flags", flags, "uint32_t")
        self.split_k = _checks.integer("split_k", split_k, "int")
        self.threads = _checks.integer("threads", threads, "int")
        self.split_rows = bool(split_rows)
        self.contiguous = bool(contiguous)
        self.buffers = buffers if buffers is not None else SharedBuffers()
        for field, t in tensors.items():
            self.register_buffer(field, t)
        for marker, t in markers.items():
            self.register_buffer(marker, t)
        self.prepare()

    # -- construction from the checkpoint's header (transformers) --

    @classmethod
    def _placeholder(
        cls,
        meta: "_lib.Weight",
        name: str,
        shapes: Dict[str, Tuple[torch.dtype, Tuple[int, ...]]],
        **kwargs: Any,
    ) -> "EXL3Linear":
        """A module whose buffers have the checkpoint's dtypes and shapes on
        the meta device, to be loaded (load_state_dict or a loader setting
        the buffers) and then prepare()d."""
        self = cls.__new__(cls)
        torch.nn.Module.__init__(self)
        self._runner = None
        self._eager = None
        self._stale = True
        self._device_weight = None
        self._layout = _CHECKPOINT
        self._meta = _meta_copy(meta)
        self.layer_name = name
        self.in_features = int(meta.k)
        self.out_features = int(meta.n)
        self.bits = int(meta.bits)
        self.codebook = _core.CODEBOOKS.get(meta.codebook, "invalid")
        self.max_m = _checks.integer("max_m", kwargs.get("max_m", 128), "int64_t")
        dtype = kwargs.get("dtype", torch.float16)
        self.dtype = _dtype("dtype", dtype)
        self.out_dtype = _dtype("out_dtype", kwargs.get("out_dtype") or dtype)
        self.compute_dtype = _dtype(
            "compute_dtype",
            kwargs.get("compute_dtype", torch.float16),
            (torch.float16, torch.bfloat16),
        )
        self.flags = _checks.integer("flags", kwargs.get("flags", 0), "uint32_t")
        self.split_k = _checks.integer("split_k", kwargs.get("split_k", 0), "int")
        self.threads = _checks.integer("threads", kwargs.get("threads", 0), "int")
        self.split_rows = bool(kwargs.get("split_rows", False))
        self.contiguous = bool(kwargs.get("contiguous", False))
        buffers = kwargs.get("buffers")
        self.buffers = buffers if buffers is not None else SharedBuffers()
        for suffix, (dt, shape) in shapes.items():
            self.register_buffer(suffix, torch.empty(shape, dtype=dt, device="meta"))
        return self

    @classmethod
    def from_tensors(cls, *args: Any, **kwargs: Any) -> "EXL3Linear":
        """A module from tensors laid out as a checkpoint stores them:
        trellis int16 [k/16, n/16, 16*bits], suh fp16 [k] (or legacy su),
        svh fp16 [n] (or legacy sv), bias fp16 [n] or None. The weight's
        arguments (trellis, suh, svh, su, sv, bias, codebook, name, device)
        are DeviceWeight.from_tensors's, whose signature is the one
        definition; CUDA tensors are used in place, host ones are copied to
        `device`. Other keyword arguments as for EXL3Linear."""
        weight_kw = {k: kwargs.pop(k) for k in _DEVICE_WEIGHT_ARGS if k in kwargs}
        return cls(DeviceWeight.from_tensors(*args, **weight_kw), **kwargs)

    @classmethod
    def from_model(cls, path: Any, **kwargs: Any) -> Dict[str, "EXL3Linear"]:
        """{layer name: EXL3Linear} for every EXL3 layer of a checkpoint,
        in the library's model order (the numbers in names compared by
        value: model.layers.2 before model.layers.10); the modules share one
        SharedBuffers (keyword arguments as for EXL3Linear)."""
        kwargs.setdefault("buffers", SharedBuffers())
        out = {}
        with _core.Model(path) as model:
            for name in model.layer_names():
                out[name] = cls(model, name, **kwargs)
        return out

    def shared(self, **kwargs: Any) -> "EXL3Linear":
        """A new module of this one's weight tensors (the same memory), with
        its own plan and buffers (keyword arguments as for EXL3Linear; by
        default this module's max_m, dtypes, flags and device)."""
        for key in (
            "max_m",
            "dtype",
            "out_dtype",
            "compute_dtype",
            "flags",
            "split_k",
            "split_rows",
            "contiguous",
        ):
            kwargs.setdefault(key, getattr(self, key))
        kwargs.setdefault("threads", self.threads)
        return type(self)(self.device_weight, **kwargs)

    # -- state --

    @property
    def device(self) -> torch.device:
        """The device of the layer's tensors (and its runs)."""
        return self.trellis.device

    @property
    def device_weight(self) -> DeviceWeight:
        """The DeviceWeight of the module's tensors (shared by shared())."""
        self._ready()
        return self._device_weight

    def _weight_buffers(self) -> Dict[str, torch.Tensor]:
        return {f: t for f, t in self._buffers.items() if f in _FIELD_DTYPES and t is not None}

    @property
    def _plan(self) -> Any:
        return self._runner

    @property
    def _plan_id(self) -> int:
        return self._ready().id

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _BUFFER_NAMES and "_buffers" in self.__dict__ and name in self._buffers:
            self._invalidate()
            if name in _PAYLOADS:  # a tensor as a checkpoint stores it
                self.__dict__["_layout"] = _CHECKPOINT
        super().__setattr__(name, value)

    def _invalidate(self) -> None:
        runner = self.__dict__.get("_runner")
        if runner is not None:
            runner.close()
        self.__dict__["_runner"] = None
        self.__dict__["_eager"] = None
        self.__dict__["_stale"] = True

    def _payload_rate(self, field: str) -> int:
        return _record_rate(self._meta, field)

    def prepare(self, buffers: Optional[SharedBuffers] = None) -> "EXL3Linear":
        """Makes the module's plan for the device its tensors are on (a
        CUDA plan with its buffers, or the CPU forward); .to() and
        load_state_dict() call it, a forward after the tensors were
        replaced another way does. Nothing to do on the meta device."""
        if buffers is not None:
            self.buffers = buffers
        self._invalidate()
        device = self.device
        if device.type == "meta":
            return self
        dw = self._device_weight
        mine = self._weight_buffers()
        layout = self.__dict__.get("_layout", _CHECKPOINT)
        if dw is None or dw.device != device or dw.layout != layout or not dw._holds(mine):
            # the buffers are the module's: converted in place, so the
            # weight runs the very tensors the module holds
            dw = DeviceWeight(self._meta, mine, device, self.layer_name, owned=True, layout=layout)
            self.__dict__["_device_weight"] = dw
            for field, t in dw._tensors.items():
                held = self._buffers.get(field)
                if held is not None and held is not t and held.dtype == t.dtype:
                    self._buffers[field] = t  # an aligned copy: the only one kept
            self.__dict__["_layout"] = dw.layout
        if device.type == "cuda":
            _device(device, False)
            runner = Plan(
                dw,
                self.max_m,
                dtype=self.dtype,
                out_dtype=self.out_dtype,
                compute_dtype=self.compute_dtype,
                flags=self.flags,
                split_k=self.split_k,
                buffers=self.buffers,
                split_rows=self.split_rows,
            )
        elif device.type == "cpu":
            runner = CpuRunner(
                dw,
                self.dtype,
                self.out_dtype,
                self.threads,
                self.max_m,
                self.split_rows,
            )
        else:
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "%s: libtrellis runs on CUDA devices and the CPU, the module is on %s"
                % (self.layer_name, device),
            )
        self.__dict__["_runner"] = runner
        self.__dict__["_eager"] = runner.eager
        self.__dict__["_stale"] = False
        return self

    def _ready(self) -> Any:
        runner = self._runner
        if runner is None:
            if self.__dict__.get("_closed"):
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT", "%s: the module is closed" % self.layer_name
                )
            self.prepare()
            runner = self._runner
            if runner is None:
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "%s: the module's tensors are on the meta device (load them first)"
                    % self.layer_name,
                )
        return runner

    def _apply(self, fn: Callable, recurse: bool = True) -> "EXL3Linear":
        # Moves the tensors, keeps their dtypes (a payload or a scale cast
        # would be another layer), takes a floating-point cast as the dtype
        # of x and y, and re-plans on the new device.
        before = self.device
        probe = fn(torch.empty(0, dtype=self.dtype, device=self.device))
        for key, t in list(self._buffers.items()):
            if t is None:
                continue
            moved = fn(t)
            if moved.dtype != t.dtype:
                moved = moved.to(t.dtype)
            self._buffers[key] = moved
        if isinstance(probe, torch.Tensor) and probe.dtype != self.dtype and probe.dtype in _DTYPES:
            self.dtype = self.out_dtype = probe.dtype
        self._invalidate()
        if self._layout == _LANES and before.type == "cuda" and self.device.type != "cuda":
            # a copy to the host made with non_blocking=True lands before
            # the payload is converted back there
            torch.cuda.synchronize(before)
        if not self.__dict__.get("_closed") and self.device.type in ("cuda", "cpu"):
            self.prepare()
        return self

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self._layout == _LANES:  # the checkpoint's arrangement, copied
            for field in _PAYLOADS:
                t = self._buffers.get(field)
                if t is not None and prefix + field in destination:
                    rate = self._payload_rate(field)
                    destination[prefix + field] = _convert_layout(t.detach(), rate, False)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        if self._layout == _LANES:
            # the payload in the checkpoint layout first, in place, as what
            # is loaded is (and a payload the state dict lacks stays)
            self._invalidate()
            for field in _PAYLOADS:
                t = self._buffers.get(field)
                if t is not None:
                    _convert_layout(t, self._payload_rate(field), False, t)
            self.__dict__["_layout"] = _CHECKPOINT
        try:
            super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        finally:
            # copied in place: the same memory, but a plan keeps derived
            # state (expanded signs, tables), so it is made again (on CUDA
            # with the payload repacked in place)
            if self.device.type in ("cuda", "cpu") and not self.__dict__.get("_closed"):
                self.prepare()

    def path(self, m: int) -> str:
        """The libtrellis path a forward of m rows takes ("cpu" on the CPU)."""
        return self._ready().path(m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The eager path: a plain tensor, no autograd, no tracer, a plan
        # made: straight to the plan's eager call (the library through
        # ctypes). Everything else below.
        eager = self._eager
        if (
            eager is not None
            and type(x) is torch.Tensor
            and not x.requires_grad
            and not _is_compiling()
        ):
            return eager(x.contiguous() if self.contiguous else x)
        return self._forward(x)

    def _forward(self, x: Any) -> torch.Tensor:
        runner = self._runner
        if runner is None:
            runner = self._ready()
        if self.contiguous and isinstance(x, torch.Tensor):
            x = x.contiguous()
        if type(x) is torch.Tensor and not _is_compiling() and not x.requires_grad:
            return runner.eager(x)
        if not isinstance(x, torch.Tensor):
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "%s: x is a %s, not a tensor" % (self.layer_name, type(x).__name__),
            )
        return torch.ops.libtrellis.exl3_linear(x, runner.id, self.out_features, self.out_dtype)

    def close(self) -> None:
        """Destroys the plan; the tensors go with the module."""
        self._invalidate()
        self.__dict__["_closed"] = True

    def extra_repr(self) -> str:
        return "%s, in_features=%d, out_features=%d, bits=%s, codebook=%s, max_m=%d, dtype=%s" % (
            self.layer_name,
            self.in_features,
            self.out_features,
            self.bits,
            self.codebook,
            self.max_m,
            self.dtype,
        )


def _markers_of(model: "_core.Model", name: str, device: torch.device) -> Dict[str, torch.Tensor]:
    out = {}
    for marker in _MARKERS:
        try:
            out[marker] = torch.from_numpy(model.tensor(name + "." + marker)).to(device)
        except TrellisError:
            pass
    return out


def forward_numpy(layer: "_core.Layer", x: Any) -> np.ndarray:
    """libtrellis.forward on CUDA: y fp32 as numpy, through one plan."""
    a, m, lead = layer.check_input(x)
    dtype = torch.float16 if a.dtype == np.float16 else torch.float32
    mod = EXL3Linear(layer, device="cuda", max_m=max(m, 1), dtype=dtype, out_dtype=torch.float32)
    try:
        xt = torch.from_numpy(a).to(mod.device)
        y = mod(xt)
        torch.cuda.synchronize(mod.device)
        out = y.cpu().numpy()
    finally:
        mod.close()
    return out.reshape(lead + (layer.n,))


__all__ = [
    "CpuRunner",
    "DeviceWeight",
    "EXL3Linear",
    "Plan",
    "SharedBuffers",
    "TrellisError",
    "exl3_linear",
]
