# SPDX-License-Identifier: Apache-2.0
"""Checks of arguments before they cross into C.

ctypes converts a Python int to a C integer by keeping its low bits and a
str to a char * that ends at its first NUL, so without these checks
`decode(path, 2**64)` reads layer 0, `threads=2**32` runs with 0 and
`path + "\\0junk"` opens `path`. Each check names the argument.
"""

import ctypes
import operator
import os
import sys

_SIZE_BITS = 8 * ctypes.sizeof(ctypes.c_size_t)
_INT_BITS = 8 * ctypes.sizeof(ctypes.c_int)

# C type name: (lowest, highest)
_RANGES = {
    "int": (-(2 ** (_INT_BITS - 1)), 2 ** (_INT_BITS - 1) - 1),
    "int64_t": (-(2**63), 2**63 - 1),
    "uint32_t": (0, 2**32 - 1),
    "size_t": (0, 2**_SIZE_BITS - 1),
}


def integer(name, value, ctype="int"):
    """`value` as an int that fits the C type `ctype` ("int", "int64_t",
    "uint32_t", "size_t"). TypeError for what is not an integer (a bool
    or a float included), OverflowError for one out of the type's range."""
    if isinstance(value, bool):
        raise TypeError("%s: expected an integer, got the bool %r" % (name, value))
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(
            "%s: expected an integer, got %s %r" % (name, type(value).__name__, value)
        ) from None
    lo, hi = _RANGES[ctype]
    if not lo <= v <= hi:
        raise OverflowError(
            "%s: %d does not fit the C %s the library takes (%d..%d)" % (name, v, ctype, lo, hi)
        )
    return v


def index(name, value, count, what):
    """A non-negative index for a size_t argument. A negative one is a
    ValueError that says how many `what` there are (the library checks the
    upper end itself, with its own message)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(
            "%s: expected an index (int) or a name (str), got %s %r"
            % (name, type(value).__name__, value)
        )
    v = operator.index(value)
    if v < 0:
        raise ValueError(
            "%s: index %d is negative (there are %d %s, 0..%d)" % (name, v, count, what, count - 1)
        )
    return integer(name, v, "size_t")


def c_string(name, value):
    """A str as the UTF-8 bytes of a char * argument. A NUL inside would
    end the C string there: ValueError."""
    if not isinstance(value, str):
        raise TypeError("%s: expected a str, got %s %r" % (name, type(value).__name__, value))
    if "\0" in value:
        raise ValueError(
            "%s: %r holds a NUL character at index %d, which would cut it short"
            % (name, value, value.index("\0"))
        )
    return value.encode("utf-8")


def path(name, value):
    """A str, bytes or os.PathLike as the bytes of a path argument
    (os.fsencode). TypeError for anything else (None included),
    ValueError for an embedded NUL."""
    try:
        p = os.fspath(value)
    except TypeError:
        raise TypeError(
            "%s: expected a path (str, bytes or os.PathLike), got %s"
            % (name, "None" if value is None else "%s %r" % (type(value).__name__, value))
        ) from None
    b = os.fsencode(p)
    if b"\0" in b:
        raise ValueError(
            "%s: %r holds a NUL character at index %d, which would cut it short"
            % (name, p, b.index(b"\0"))
        )
    return b


def dtype_text(dtype):
    """A numpy dtype for a message: "float16", or "big-endian float16
    ('>f2')" when its byte order is not the machine's, which a check that
    compares with np.float16 refuses although its name is the same."""
    if dtype.byteorder not in ("=", "|") and dtype.byteorder != _NATIVE:
        order = "big-endian" if dtype.byteorder == ">" else "little-endian"
        return "%s %s (%r)" % (order, dtype.name, dtype.str)
    return dtype.name


def native_byte_order(dtype):
    """True when arrays of `dtype` are in the machine's byte order."""
    return dtype.byteorder in ("=", "|", _NATIVE)


_NATIVE = "<" if sys.byteorder == "little" else ">"
