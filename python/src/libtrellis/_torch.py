"""The PyTorch level: the libtrellis::exl3_linear operator and EXL3Linear.

The operator runs a prepared libtrellis plan on the current CUDA stream.
Everything a run needs besides x and y (the rotated input, staging and
workspace buffers) is allocated once, when the plan is made, from
trellis_plan_query at every m up to max_m; a call allocates only its output,
through PyTorch's caching allocator, so it can be captured into a CUDA graph
and traced by torch.compile (its fake implementation gives the output's
shape and dtype).
"""

import ctypes
import itertools
import threading
import weakref
from ctypes import byref, c_void_p

import numpy as np
import torch

from . import _core, _lib
from ._core import TrellisError, call, error
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

# Frees that would break a stream capture in progress (cudaFree) wait here
# until the next free outside a capture.
_deferred = []
_deferred_lock = threading.Lock()


def _capturing():
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except RuntimeError:
        return False


def _release(fn, handle):
    with _deferred_lock:
        if _capturing():
            _deferred.append((fn, handle))
            return
        pending = list(_deferred)
        _deferred.clear()
    for f, h in pending + [(fn, handle)]:
        f(h)


def _device(device):
    """A torch.device with an index (the current CUDA device by default)."""
    if device is None:
        device = "cuda"
    device = torch.device(device)
    if device.type != "cuda":
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "device: libtrellis runs on CUDA devices, got %s" % device,
        )
    if not torch.cuda.is_available():
        raise error("TRELLIS_ERR_NO_DEVICE", "device: torch sees no CUDA device")
    if not _core.cuda_built():
        raise error(
            "TRELLIS_ERR_NO_DEVICE",
            "device: %s was built without CUDA" % _lib.LIBRARY_PATH,
        )
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _dtype(name, dtype, allowed=(torch.float16, torch.bfloat16, torch.float32)):
    if dtype not in allowed:
        raise error(
            "TRELLIS_ERR_DTYPE",
            "%s: expected one of %s, got %s" % (name, ", ".join(str(d) for d in allowed), dtype),
        )
    return dtype


class DeviceWeight:
    """A layer's weight on one CUDA device, shared by every plan (module)
    that runs it.

    Made by upload() (the library copies a host layer into one allocation it
    owns) or by from_tensors() with CUDA tensors (the plans borrow the
    tensors' memory, which this object keeps alive). The device memory is
    freed when the last module using it is gone, or by close().
    """

    def __init__(self, view, device, name, handle=None, keep=None):
        self._view = view  # POINTER(Weight), valid while this object lives
        self._handle = handle
        self._keep = keep
        self._plans = 0
        self.device = device
        self.name = name
        w = view.contents
        self.k = int(w.k)
        self.n = int(w.n)
        self.bits = int(w.bits)
        self.codebook = _core.CODEBOOKS.get(w.codebook, "invalid")
        self.has_bias = bool(w.bias)

    @classmethod
    def upload(cls, layer, device=None):
        """Copies a host layer (libtrellis.Layer) to a CUDA device."""
        device = _device(device)
        w = layer.weight()
        handle = c_void_p()
        with torch.cuda.device(device):
            call(lib.trellis_weight_upload, byref(w), byref(handle))
        view = lib.trellis_device_weight_view(handle)
        if not view:
            message = _lib.text(lib.trellis_last_error())
            lib.trellis_device_weight_destroy(handle)
            raise error("TRELLIS_ERR_INTERNAL", message)
        return cls(view, device, layer.name, handle=handle)

    @classmethod
    def from_tensors(
        cls,
        trellis,
        suh=None,
        svh=None,
        *,
        su=None,
        sv=None,
        bias=None,
        codebook="mcg",
        name="layer",
        device=None,
    ):
        """A weight from tensors laid out as a checkpoint stores them (see
        libtrellis.Layer.from_arrays). CUDA tensors are used in place (a
        copy is made only of a misaligned or non-contiguous one); CPU
        tensors and numpy arrays are uploaded."""
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
        device = _device(device if device is not None else parts["trellis"].device)
        expect = {
            "trellis": torch.int16,
            "suh": torch.float16,
            "svh": torch.float16,
            "su": torch.int16,
            "sv": torch.int16,
            "bias": torch.float16,
        }
        keep = {}
        w = _lib.Weight()
        lib.trellis_weight_init(byref(w))
        for field, t in parts.items():
            if t is None:
                continue
            if t.device != device:
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "%s: on %s, expected %s" % (field, t.device, device),
                )
            if t.dtype != expect[field]:
                raise error(
                    "TRELLIS_ERR_DTYPE",
                    "%s: expected %s, got %s" % (field, expect[field], t.dtype),
                )
            align = 16 if field == "trellis" else 8
            if not t.is_contiguous() or t.data_ptr() % align:
                t = t.contiguous().clone()
            keep[field] = t
            setattr(w, field, ctypes.cast(t.data_ptr(), type(getattr(w, field))))
        t = keep["trellis"]
        if t.dim() != 3 or t.shape[2] % 16:
            raise error(
                "TRELLIS_ERR_SHAPE",
                "trellis: expected [k/16, n/16, 16*bits], got %s" % list(t.shape),
            )
        w.k, w.n, w.bits = t.shape[0] * 16, t.shape[1] * 16, t.shape[2] // 16
        w.codebook = _core.codebook_id(codebook)
        call(lib.trellis_weight_validate, byref(w))
        for field in ("suh", "svh", "bias", "su", "sv"):
            length = {"suh": w.k, "su": w.k // 16, "sv": w.n // 16}.get(field, w.n)
            if field in keep and tuple(keep[field].shape) != (length,):
                raise error(
                    "TRELLIS_ERR_SHAPE",
                    "%s: expected [%d], got %s" % (field, length, list(keep[field].shape)),
                )
        keep["_struct"] = w
        return cls(ctypes.pointer(w), device, name, keep=keep)

    def close(self):
        """Frees the device memory now (uploaded weights). Every module
        using this weight must be closed first."""
        if self._plans:
            raise RuntimeError(
                "DeviceWeight %s: still used by %d plan(s); close them first"
                % (self.name, self._plans)
            )
        handle, self._handle = self._handle, None
        self._keep = None
        self._view = None
        if handle:
            _release(lib.trellis_device_weight_destroy, handle)

    def __del__(self):
        try:
            if not self._plans:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<libtrellis.DeviceWeight %s k=%d n=%d bits=%d %s on %s>" % (
            self.name,
            self.k,
            self.n,
            self.bits,
            self.codebook,
            self.device,
        )


_plan_ids = itertools.count(1)
_plans = weakref.WeakValueDictionary()


class Plan:
    """A prepared libtrellis plan with its buffers (one per module).

    Runs x [m, k] (1 <= m <= max_m, the plan's input dtype, contiguous, on
    its device) into y [m, n] of its output dtype on the current stream."""

    def __init__(
        self,
        weight,
        max_m,
        dtype=torch.float16,
        out_dtype=None,
        compute_dtype=torch.float16,
        flags=0,
        split_k=0,
    ):
        self._plan = None
        self.weight = weight
        self.device = weight.device
        self.max_m = int(max_m)
        self.dtype = _dtype("dtype", dtype)
        self.out_dtype = _dtype("out_dtype", out_dtype or dtype)
        self.compute_dtype = _dtype("compute_dtype", compute_dtype, (torch.float16, torch.bfloat16))
        self.k, self.n = weight.k, weight.n
        desc = _lib.PlanDesc()
        lib.trellis_plan_desc_init(byref(desc))
        desc.max_m = self.max_m
        desc.input_dtype = _DTYPES[self.dtype]
        desc.output_dtype = _DTYPES[self.out_dtype]
        desc.compute_dtype = _DTYPES[self.compute_dtype]
        desc.flags = int(flags)
        desc.split_k = int(split_k)
        plan = c_void_p()
        with torch.cuda.device(self.device):
            call(lib.trellis_plan_create, weight._view, byref(desc), byref(plan))
            weight._plans += 1
            self._plan = plan
            call(lib.trellis_plan_prepare, plan)
            # The largest size of every buffer over all m a run may pass.
            sizes = _lib.BufferSizes()
            need = dict(rotated=0, input_f16=0, output_f16=0, workspace=0)
            for m in range(1, self.max_m + 1):
                call(lib.trellis_plan_query, plan, m, byref(sizes))
                for key in need:
                    need[key] = max(need[key], getattr(sizes, key + "_bytes"))
            self._storage = {
                key: torch.empty(nbytes, dtype=torch.uint8, device=self.device)
                for key, nbytes in need.items()
                if nbytes
            }
        buffers = _lib.Buffers()
        lib.trellis_buffers_init(byref(buffers))
        for key, t in self._storage.items():
            setattr(buffers, key, t.data_ptr())
            setattr(buffers, key + "_bytes", t.numel())
        self._buffers = buffers
        self.id = next(_plan_ids)
        _plans[self.id] = self

    def path(self, m):
        """The path ("fused", "generic" or "dense") a run of m rows takes."""
        sizes = _lib.BufferSizes()
        call(lib.trellis_plan_query, self._live(), int(m), byref(sizes))
        return _PATHS.get(sizes.path, str(sizes.path))

    def _live(self):
        if self._plan is None:
            raise ValueError("libtrellis plan of %s is closed" % self.weight.name)
        return self._plan

    def check(self, x):
        """Raises TrellisError unless x fits a run: a contiguous CUDA tensor
        on the plan's device, of its input dtype, [..., k] with at most
        max_m rows in all. Pure Python on shapes, so the fake
        implementation runs it while torch.compile traces."""
        name = self.weight.name
        if not isinstance(x, torch.Tensor):
            raise error("TRELLIS_ERR_INVALID_ARGUMENT", "%s: x is not a tensor" % name)
        if x.device != self.device:
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "%s: x is on %s, the layer on %s" % (name, x.device, self.device),
            )
        if x.dtype != self.dtype:
            raise error(
                "TRELLIS_ERR_DTYPE",
                "%s: x is %s, the layer takes %s" % (name, x.dtype, self.dtype),
            )
        if x.dim() < 1 or x.shape[-1] != self.k:
            raise error(
                "TRELLIS_ERR_SHAPE",
                "%s: x has shape %s, expected [..., %d]" % (name, list(x.shape), self.k),
            )
        rows = x.numel() // self.k
        if rows > self.max_m:
            raise error(
                "TRELLIS_ERR_SHAPE",
                "%s: x has %d rows (shape %s), above max_m = %d (make the "
                "layer with a larger max_m)" % (name, rows, list(x.shape), self.max_m),
            )
        if not x.is_contiguous():
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "%s: x is not contiguous (shape %s, strides %s); call "
                ".contiguous() first" % (name, list(x.shape), list(x.stride())),
            )

    def run(self, x, y):
        """y = layer(x) on the current stream of the plan's device (x and y
        checked, contiguous, m = x.numel() / k rows)."""
        m = x.numel() // self.k
        if m == 0:
            return y
        stream = torch.cuda.current_stream(self.device).cuda_stream
        lib.trellis_clear_error()
        if self.device.index != torch.cuda.current_device():
            with torch.cuda.device(self.device):
                st = lib.trellis_run(
                    self._live(),
                    x.data_ptr(),
                    m,
                    y.data_ptr(),
                    byref(self._buffers),
                    stream,
                )
        else:
            st = lib.trellis_run(
                self._live(),
                x.data_ptr(),
                m,
                y.data_ptr(),
                byref(self._buffers),
                stream,
            )
        _core.check(st)
        return y

    def close(self):
        """Destroys the plan (its buffers go back to PyTorch)."""
        plan, self._plan = self._plan, None
        if plan:
            _release(lib.trellis_plan_destroy, plan)
            self.weight._plans -= 1
        self._storage = {}

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _live_plan(plan_id):
    plan_id = int(plan_id)  # a constant, even where a tracer made it symbolic
    plan = _plans.get(plan_id)
    if plan is None or plan._plan is None:
        raise error(
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "exl3_linear: plan %d is closed or was never made" % plan_id,
        )
    return plan


@torch.library.custom_op("libtrellis::exl3_linear", mutates_args=())
def exl3_linear(x: torch.Tensor, plan_id: int, n: int, out_dtype: torch.dtype) -> torch.Tensor:
    """y [..., n] = the EXL3 layer of plan `plan_id` applied to x [..., k].

    plan_id names a live libtrellis.Plan (EXL3Linear makes them); n and
    out_dtype are the plan's, given here so the output is described by the
    arguments alone. x must pass Plan.check (TrellisError otherwise)."""
    plan = _live_plan(plan_id)
    plan.check(x)
    y = torch.empty((*x.shape[:-1], n), dtype=out_dtype, device=x.device)
    return plan.run(x, y)


@exl3_linear.register_fake
def _exl3_linear_fake(x, plan_id, n, out_dtype):
    _live_plan(plan_id).check(x)
    return x.new_empty((*x.shape[:-1], n), dtype=out_dtype)


class EXL3Linear(torch.nn.Module):
    """An EXL3 linear layer as a torch module: y = x W + bias.

    EXL3Linear(path, name) loads layer `name` of a model file or directory;
    EXL3Linear(layer) takes a libtrellis.Layer, EXL3Linear(weight) a
    DeviceWeight (shared with other modules: each has its own plan and
    buffers, so modules of one weight may run on different streams at once;
    one module runs on one stream at a time). EXL3Linear.from_tensors and
    EXL3Linear.from_model build from tensors and from a whole checkpoint.

    max_m: the most rows one forward may pass (the buffers are sized for
    it; more is an error). dtype: x's dtype (float16, bfloat16 or float32);
    out_dtype: y's (default dtype); compute_dtype: the rotated input's
    (float16, the format's, or bfloat16). flags: TRELLIS_PLAN_* bits.

    forward(x): x of shape [..., in_features], contiguous, on the module's
    device, of its dtype, with at most max_m rows in all; y [...,
    out_features]. The module holds no parameters or buffers: .to() leaves
    it where it was made.
    """

    def __init__(
        self,
        source,
        name=None,
        *,
        max_m=128,
        dtype=torch.float16,
        out_dtype=None,
        compute_dtype=torch.float16,
        device=None,
        flags=0,
        split_k=0,
    ):
        super().__init__()
        if isinstance(source, DeviceWeight):
            weight = source
            if device is not None and _device(device) != weight.device:
                raise error(
                    "TRELLIS_ERR_INVALID_ARGUMENT",
                    "device: the weight is on %s, not %s" % (weight.device, device),
                )
        else:
            if isinstance(source, _core.Layer):
                layer = source
            elif isinstance(source, _core.Model):
                if name is None:
                    raise TypeError("EXL3Linear(model, name): the layer name is missing")
                layer = source.layer(name)
            else:
                if name is None:
                    raise TypeError("EXL3Linear(path, name): the layer name is missing")
                with _core.Model(source) as model:
                    weight = DeviceWeight.upload(model.layer(name), device)
                layer = None
            if layer is not None:
                weight = DeviceWeight.upload(layer, device)
        self.device_weight = weight
        self.layer_name = weight.name
        self.in_features = weight.k
        self.out_features = weight.n
        self.max_m = int(max_m)
        self._plan = Plan(
            weight,
            self.max_m,
            dtype=dtype,
            out_dtype=out_dtype,
            compute_dtype=compute_dtype,
            flags=flags,
            split_k=split_k,
        )
        self.dtype = self._plan.dtype
        self.out_dtype = self._plan.out_dtype
        self.device = weight.device
        self._plan_id = self._plan.id

    @classmethod
    def from_tensors(
        cls,
        trellis,
        suh=None,
        svh=None,
        *,
        su=None,
        sv=None,
        bias=None,
        codebook="mcg",
        name="layer",
        **kwargs,
    ):
        """A module from tensors laid out as a checkpoint stores them:
        trellis int16 [k/16, n/16, 16*bits], suh fp16 [k] (or legacy su),
        svh fp16 [n] (or legacy sv), bias fp16 [n] or None. CUDA tensors are
        used in place; host ones are uploaded. Other keyword arguments as
        for EXL3Linear."""
        device = kwargs.pop("device", None)
        weight = DeviceWeight.from_tensors(
            trellis,
            suh,
            svh,
            su=su,
            sv=sv,
            bias=bias,
            codebook=codebook,
            name=name,
            device=device,
        )
        return cls(weight, **kwargs)

    @classmethod
    def from_model(cls, path, **kwargs):
        """{layer name: EXL3Linear} for every EXL3 layer of a checkpoint
        (keyword arguments as for EXL3Linear)."""
        device = kwargs.pop("device", None)
        out = {}
        with _core.Model(path) as model:
            for layer in model.layers():
                weight = DeviceWeight.upload(layer, device)
                out[layer.name] = cls(weight, **kwargs)
        return out

    def shared(self, **kwargs):
        """A new module of this one's device weight, with its own plan and
        buffers (keyword arguments as for EXL3Linear; by default this
        module's max_m, dtypes and device)."""
        kwargs.setdefault("max_m", self.max_m)
        kwargs.setdefault("dtype", self.dtype)
        kwargs.setdefault("out_dtype", self.out_dtype)
        kwargs.setdefault("compute_dtype", self._plan.compute_dtype)
        return type(self)(self.device_weight, **kwargs)

    def path(self, m):
        """The libtrellis path a forward of m rows takes."""
        return self._plan.path(m)

    def forward(self, x):
        if not isinstance(x, torch.Tensor):
            raise error(
                "TRELLIS_ERR_INVALID_ARGUMENT",
                "%s: x is a %s, not a tensor" % (self.layer_name, type(x).__name__),
            )
        return torch.ops.libtrellis.exl3_linear(x, self._plan_id, self.out_features, self.out_dtype)

    def close(self):
        """Destroys the plan; the device weight goes with its last module."""
        if self._plan is not None:
            self._plan.close()
        self._plan = None
        self.device_weight = None

    def extra_repr(self):
        return "%s, in_features=%d, out_features=%d, max_m=%d, dtype=%s" % (
            self.layer_name,
            self.in_features,
            self.out_features,
            self.max_m,
            self.dtype,
        )


def forward_numpy(layer, x):
    """libtrellis.forward on CUDA: y fp32 as numpy, through one plan."""
    a, m, one_row = layer.check_input(x)
    weight = DeviceWeight.upload(layer)
    dtype = torch.float16 if a.dtype == np.float16 else torch.float32
    plan = Plan(weight, max(m, 1), dtype=dtype, out_dtype=torch.float32)
    try:
        xt = torch.from_numpy(a).to(weight.device)
        y = torch.empty((m, layer.n), dtype=torch.float32, device=weight.device)
        plan.run(xt, y)
        torch.cuda.synchronize(weight.device)
        out = y.cpu().numpy()
    finally:
        plan.close()
    return out[0] if one_row else out


__all__ = ["DeviceWeight", "EXL3Linear", "Plan", "TrellisError", "exl3_linear"]
