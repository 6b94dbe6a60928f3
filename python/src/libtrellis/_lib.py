# SPDX-License-Identifier: Apache-2.0
"""ctypes declarations of include/trellis.h and the loaded libtrellis.so.

Every struct mirrors the C header field for field. Structs the caller fills
are initialised by the library's own *_init() calls, so struct_size is always
the size the loaded library was built with; fields past that size (the pair
fields of trellis_weight on a library without pairs) are never read.
"""

import ctypes
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int16,
    c_int64,
    c_size_t,
    c_uint16,
    c_uint32,
    c_void_p,
)

MAX_DIMS = 8

# trellis_status
OK = 0

# trellis_dtype
F16 = 0
BF16 = 1
F32 = 2

# trellis_sign_form
SIGNS_SCALED = 0
SIGNS_LEGACY = 1

# trellis_layout (of a weight's payload)
LAYOUT_CHECKPOINT = 0
LAYOUT_LANES = 1
LAYOUT_KMAJOR = 2

# trellis_path
PATH_NONE = 0
PATH_FUSED = 1
PATH_GENERIC = 2
PATH_DENSE = 3

# plan flags
PLAN_FORCE_GENERIC = 0x1
PLAN_FORCE_DECODE = 0x2
PLAN_FORCE_DENSE = 0x4
PLAN_EXACT_WEIGHTS = 0x8
PLAN_LEGACY_KERNELS = 0x10
PLAN_NO_DEPENDENT_LAUNCH = 0x20

# trellis_tensor_dtype, in enum order
TENSOR_DTYPES = (
    "BOOL",
    "U8",
    "I8",
    "I16",
    "U16",
    "I32",
    "U32",
    "I64",
    "U64",
    "F16",
    "BF16",
    "F32",
    "F64",
    "F8_E4M3",
    "F8_E5M2",
)


class Weight(Structure):
    """trellis_weight. The pair fields follow TRELLIS_WEIGHT_SIZE_V1, the
    half and layout fields TRELLIS_WEIGHT_SIZE_V2."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("k", c_int64),
        ("n", c_int64),
        ("bits", c_int),
        ("codebook", c_int),
        ("trellis", POINTER(c_int16)),
        ("suh", POINTER(c_uint16)),
        ("svh", POINTER(c_uint16)),
        ("su", POINTER(c_int16)),
        ("sv", POINTER(c_int16)),
        ("bias", POINTER(c_uint16)),
        # pairs (all zero for a uniform layer)
        ("pair", c_int),
        ("rate_axis", c_int),
        ("bits1", c_int),
        ("trellis1", POINTER(c_int16)),
        # 0.4: a half-integer rate (K = bits + 1/2) and the payload layout
        ("half", c_int),
        ("layout", c_int),
    ]


WEIGHT_SIZE_V1 = Weight.pair.offset
WEIGHT_SIZE_V2 = Weight.half.offset


class Tensor(Structure):
    """trellis_tensor."""

    _fields_ = [
        ("name", c_char_p),
        ("dtype", c_int),
        ("ndim", c_int),
        ("shape", c_int64 * MAX_DIMS),
        ("data", c_void_p),
        ("nbytes", c_size_t),
    ]


class QuantConfig(Structure):
    """trellis_quant_config (descriptor_sha256: libraries with b12x)."""

    _fields_ = [
        ("present", c_int),
        ("quant_method", c_char * 32),
        ("version", c_char * 32),
        ("bits", c_double),
        ("head_bits", c_int),
        ("codebook", c_char * 16),
        ("out_scales", c_char * 16),
        ("calibration_rows", c_int64),
        ("calibration_cols", c_int64),
        ("descriptor_sha256", c_char * 65),
        # 0.4: ExLlamaV3 1.6's fields (head_bits + 1/2 where head_half)
        ("head_half", c_int),
        ("mtp_bits", c_int),
        ("mtp_half", c_int),
        ("vision_bits", c_int),
        ("tie_word_embeddings", c_int),
    ]


class Layer(Structure):
    """trellis_layer."""

    _fields_ = [
        ("name", c_char_p),
        ("weight", Weight),
        ("signs", c_int),
        ("has_bias", c_int),
    ]


class LayerInfo(Structure):
    """trellis_layer_info (pair and rate_axis: libraries with pairs)."""

    _fields_ = [
        ("name", c_char_p),
        ("k", c_int64),
        ("n", c_int64),
        ("bits", c_int),
        ("codebook", c_int),
        ("input_signs", c_int),
        ("output_signs", c_int),
        ("has_bias", c_int),
        ("pair", c_int),
        ("rate_axis", c_int),
        ("half", c_int),  # 0.4: K = bits + 1/2
    ]


H128_FN = CFUNCTYPE(
    c_int,
    c_void_p,
    c_int,
    c_void_p,
    c_int,
    POINTER(c_uint16),
    POINTER(c_uint16),
    c_int64,
    c_int64,
    c_void_p,
    c_void_p,
)


class PlanDesc(Structure):
    """trellis_plan_desc."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("max_m", c_int64),
        ("input_dtype", c_int),
        ("output_dtype", c_int),
        ("compute_dtype", c_int),
        ("h128", H128_FN),
        ("h128_user_data", c_void_p),
        ("flags", c_uint32),
        ("split_k", c_int),
    ]


class BufferSizes(Structure):
    """trellis_buffer_sizes."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("path", c_int),
        ("rotated_bytes", c_size_t),
        ("input_f16_bytes", c_size_t),
        ("output_f16_bytes", c_size_t),
        ("workspace_bytes", c_size_t),
    ]


class Buffers(Structure):
    """trellis_buffers."""

    _fields_ = [
        ("struct_size", c_uint32),
        ("rotated", c_void_p),
        ("rotated_bytes", c_size_t),
        ("input_f16", c_void_p),
        ("input_f16_bytes", c_size_t),
        ("output_f16", c_void_p),
        ("output_f16_bytes", c_size_t),
        ("workspace", c_void_p),
        ("workspace_bytes", c_size_t),
    ]


P = POINTER
_status = c_int
# name: (restype, argtypes). Entry points of newer libraries are optional:
# see OPTIONAL.
_PROTOTYPES = {
    "trellis_version_number": (c_int, []),
    "trellis_version_string": (c_char_p, []),
    "trellis_status_name": (c_char_p, [c_int]),
    "trellis_status_string": (c_char_p, [c_int]),
    "trellis_last_error": (c_char_p, []),
    "trellis_clear_error": (None, []),
    "trellis_dtype_name": (c_char_p, [c_int]),
    "trellis_codebook_name": (c_char_p, [c_int]),
    "trellis_tensor_dtype_name": (c_char_p, [c_int]),
    "trellis_path_name": (c_char_p, [c_int]),
    "trellis_weight_init": (None, [P(Weight)]),
    "trellis_weight_validate": (_status, [P(Weight)]),
    "trellis_weight_payload_bytes": (c_size_t, [P(Weight)]),
    "trellis_decode_weight": (_status, [P(Weight), c_void_p]),
    "trellis_dense_weight": (_status, [P(Weight), c_void_p]),
    "trellis_cpu_workspace_size": (c_size_t, [P(Weight), c_int64, c_int]),
    "trellis_cpu_forward": (
        _status,
        [P(Weight), c_void_p, c_int, c_int64, c_void_p, c_int, c_void_p, c_size_t, c_int],
    ),
    "trellis_file_open": (_status, [c_char_p, P(c_void_p)]),
    "trellis_file_close": (None, [c_void_p]),
    "trellis_file_tensor_count": (c_size_t, [c_void_p]),
    "trellis_file_tensor": (_status, [c_void_p, c_size_t, P(Tensor)]),
    "trellis_model_open": (_status, [c_char_p, P(c_void_p)]),
    "trellis_model_close": (None, [c_void_p]),
    "trellis_model_quant_config": (P(QuantConfig), [c_void_p]),
    "trellis_model_layer_count": (c_size_t, [c_void_p]),
    "trellis_model_layer": (_status, [c_void_p, c_size_t, P(Layer)]),
    "trellis_model_find_layer": (_status, [c_void_p, c_char_p, P(Layer)]),
    "trellis_model_other_count": (c_size_t, [c_void_p]),
    "trellis_model_other": (_status, [c_void_p, c_size_t, P(Tensor)]),
    "trellis_model_find_tensor": (_status, [c_void_p, c_char_p, P(Tensor)]),
    "trellis_cuda_built": (c_int, []),
    "trellis_cuda_device_count": (c_int, []),
    "trellis_weight_upload": (_status, [P(Weight), P(c_void_p)]),
    "trellis_device_weight_view": (P(Weight), [c_void_p]),
    "trellis_device_weight_destroy": (None, [c_void_p]),
    "trellis_plan_desc_init": (None, [P(PlanDesc)]),
    "trellis_buffers_init": (None, [P(Buffers)]),
    "trellis_plan_create": (_status, [P(Weight), P(PlanDesc), P(c_void_p)]),
    "trellis_plan_destroy": (None, [c_void_p]),
    "trellis_plan_query": (_status, [c_void_p, c_int64, P(BufferSizes)]),
    "trellis_plan_prepare": (_status, [c_void_p]),
    "trellis_run": (
        _status,
        [c_void_p, c_void_p, c_int64, c_void_p, P(Buffers), c_void_p],
    ),
    # b12x formats, header-only layer listing, value checks
    "trellis_pair_kind_name": (c_char_p, [c_int]),
    "trellis_rate_axis_name": (c_char_p, [c_int]),
    "trellis_model_layer_info": (_status, [c_void_p, c_size_t, P(LayerInfo)]),
    "trellis_weight_check_values": (_status, [P(Weight)]),
    # 0.3.0: the shared buffers of a set of plans
    "trellis_plans_buffer_sizes": (_status, [P(c_void_p), c_size_t, c_int64, P(BufferSizes)]),
    # 0.4: the GPU's lane layout of a payload
    "trellis_weight_repack": (_status, [P(Weight), c_void_p, c_void_p, c_void_p]),
    "trellis_weight_repack_host": (_status, [P(Weight), c_void_p, c_void_p]),
    # 0.5: the k-major layout
    "trellis_weight_upload_layout": (_status, [P(Weight), c_int, P(c_void_p)]),
    "trellis_weight_repack_layout": (_status, [P(Weight), c_int, c_void_p, c_void_p, c_void_p]),
    "trellis_weight_repack_host_layout": (_status, [P(Weight), c_int, c_void_p, c_void_p]),
}
OPTIONAL = frozenset(
    [
        "trellis_pair_kind_name",
        "trellis_rate_axis_name",
        "trellis_model_layer_info",
        "trellis_weight_check_values",
        "trellis_plans_buffer_sizes",
        "trellis_weight_repack",
        "trellis_weight_repack_host",
        "trellis_weight_upload_layout",
        "trellis_weight_repack_layout",
        "trellis_weight_repack_host_layout",
    ]
)


def _library_path():
    env = os.environ.get("LIBTRELLIS_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libtrellis.so")


def _load():
    path = _library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise ImportError(
            "libtrellis: cannot load the C library %s (%s); reinstall the "
            "package (pip install ./python) or set LIBTRELLIS_LIBRARY" % (path, exc)
        ) from exc
    missing = []
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if name not in OPTIONAL:
                missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise ImportError(
            "libtrellis: %s lacks %s: it is older than these bindings" % (path, ", ".join(missing))
        )
    w = Weight()
    lib.trellis_weight_init(ctypes.byref(w))
    if w.struct_size > ctypes.sizeof(Weight):
        raise ImportError(
            "libtrellis: %s has a trellis_weight of %d bytes, these bindings "
            "know %d: they are older than the library"
            % (path, w.struct_size, ctypes.sizeof(Weight))
        )
    return lib, path


lib, LIBRARY_PATH = _load()


def has(name):
    """True when the loaded library exports the entry point `name`."""
    return hasattr(lib, name)


def text(ptr):
    """A C string returned by the library, as str ("" for NULL)."""
    return ptr.decode("utf-8", "replace") if ptr else ""


# Pair fields are read only from weights whose struct_size covers them.
HAS_PAIRS = has("trellis_pair_kind_name")
# 0.4: half-integer rates and ExLlamaV3 1.6's config fields
HAS_HALF = has("trellis_decode_tile_rate")


def rate_of_width(width):
    """(bits, half) of a trellis tensor's last dimension: 16 K int16, so
    16 bits, or 16 bits + 8 for a half-integer K = bits + 1/2; None when
    the width is neither."""
    if width % 16 == 0:
        return width // 16, 0
    if width % 16 == 8 and HAS_HALF:
        return width // 16, 1
    return None


def weight_has_pair_fields(w):
    return w.struct_size >= WEIGHT_SIZE_V2
