# SPDX-License-Identifier: Apache-2.0
"""Hostile and careless use of the NumPy level: objects closed while other
threads compute, integers that do not fit the C types, strings with NUL
characters, and the messages of what is refused."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import libtrellis
from libtrellis import TrellisError

from conftest import CASES, TOY_MODEL, case_path

TOY_LAYER = "model.layers.1.mlp.up_proj"


def write_safetensors(path, tensors):
    """A minimal safetensors writer: {name: ndarray} (F16, I16)."""
    import json

    codes = {np.dtype(np.float16): "F16", np.dtype(np.int16): "I16"}
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        header[name] = {
            "dtype": codes[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [at, at + a.nbytes],
        }
        blobs.append(a.tobytes())
        at += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def big_layer_file(tmp_path, k=4096, n=4096, bits=2):
    path = os.path.join(str(tmp_path), "big.safetensors")
    rng = np.random.default_rng(7)
    write_safetensors(
        path,
        {
            "big.proj.suh": np.ones(k, np.float16),
            "big.proj.svh": np.ones(n, np.float16),
            "big.proj.trellis": rng.integers(
                -(2**15), 2**15, (k // 16, n // 16, 16 * bits), dtype=np.int16
            ),
        },
    )
    return path


def run_python(script, *args):
    """Runs `script` in a fresh interpreter (a crash there is a failed
    test here, not the end of the test run)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(libtrellis.__file__))]
        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# ----------------------------------------------- closed while running --

CLOSE_WHILE_RUNNING = r"""
import sys, threading, time
import numpy as np
import libtrellis

model = libtrellis.Model(sys.argv[1])
layer = model.layer("big.proj")
x = np.ones((1024, 4096), np.float16)
out = {}

def run():
    try:
        out["y"] = layer.forward(x, threads=2)
    except BaseException as exc:
        out["error"] = exc

t0 = time.monotonic()
worker = threading.Thread(target=run)
worker.start()
time.sleep(0.5)
model.close()
closed = time.monotonic() - t0
worker.join()
done = time.monotonic() - t0
assert "y" in out, out
assert np.isfinite(out["y"]).all() and out["y"].shape == (1024, 4096)
assert model.closed
try:
    layer.forward(x[:1])
except ValueError as exc:
    assert "closed" in str(exc), exc
else:
    raise SystemExit("a forward after close did not raise")
print("closed at %.2f s, the forward ended at %.2f s" % (closed, done))
"""


def test_close_while_a_forward_runs(tmp_path):
    """The audit's crash: a 4096x4096 layer, a forward of (1024, 4096) in a
    thread, model.close() 0.5 s later: the mapping was unmapped under the
    running C call (SIGSEGV). Now the close takes effect when the call
    returns, and new calls refuse."""
    r = run_python(CLOSE_WHILE_RUNNING, big_layer_file(tmp_path))
    assert r.returncode == 0, "exit %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr)
    closed, done = [float(w) for w in r.stdout.split() if w.replace(".", "").isdigit()]
    assert closed < done, r.stdout  # the close came while the forward ran


def test_close_while_many_threads_compute():
    model = libtrellis.Model(TOY_MODEL)
    layer = model.layer(TOY_LAYER)
    x = np.ones((4, layer.k), np.float16)
    want = layer.forward(x, threads=1)
    started = threading.Barrier(9)
    errors, results = [], []

    def work():
        started.wait()
        try:
            for _ in range(50):
                results.append(layer.forward(x, threads=1))
        except ValueError as exc:  # the close came first: refused, cleanly
            if "closed" not in str(exc):
                errors.append(exc)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    started.wait()
    model.close()
    for t in threads:
        t.join()
    assert not errors, errors
    for y in results:
        assert np.array_equal(y, want)


def test_many_threads_one_model_and_one_layer():
    """Forwards, decodes and lookups from 8 threads at once give what one
    thread gives."""
    with libtrellis.Model(TOY_MODEL) as model:
        names = model.layer_names()
        xs = {n: np.ones((3, model.layer(n).k), np.float16) for n in names}
        want = {n: model.layer(n).forward(xs[n], threads=1) for n in names}
        w_hat = model.layer(names[0]).decode()
        errors = []

        def work(start):
            try:
                for i in range(len(names)):
                    name = names[(start + i) % len(names)]
                    lay = model.layer(name)
                    assert np.array_equal(lay.forward(xs[name], threads=2), want[name])
                    assert model.layer_info()[0]["name"] == names[0]
                assert np.array_equal(model.layer(names[0]).decode(), w_hat)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors


def test_model_none_and_bad_paths():
    """Model(None) raised AttributeError from __del__ besides its error."""
    r = run_python(
        "import libtrellis\n"
        "try:\n"
        "    libtrellis.Model(None)\n"
        "except TypeError as e:\n"
        "    print('TypeError:', e)\n"
    )
    assert r.returncode == 0, r.stderr
    assert "path: expected a path (str, bytes or os.PathLike), got None" in r.stdout
    assert r.stderr == "", r.stderr  # no "Exception ignored in __del__"
    with pytest.raises(TrellisError) as e:
        libtrellis.Model("")
    assert "path is empty" in str(e.value)


# ------------------------------------------------- integers that wrap --


def test_layer_index_out_of_the_c_range():
    """decode(path, 2**64) read layer 0; layer(-1) said 'layer index
    18446744073709551615 out of range'."""
    path = case_path(CASES[0])
    with pytest.raises(OverflowError, match=r"layer: 18446744073709551616 does not fit"):
        libtrellis.decode(path, 2**64)
    with pytest.raises(OverflowError, match="layer"):
        libtrellis.decode(path, 2**64 + 0)
    with libtrellis.Model(TOY_MODEL) as m:
        with pytest.raises(ValueError, match=r"layer: index -1 is negative \(there are 14"):
            m.layer(-1)
        with pytest.raises(TrellisError) as e:
            m.layer(14)
        assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
        assert "layer index 14 out of range (14 layers)" in str(e.value)
        with pytest.raises(TypeError, match="layer: expected an index"):
            m.layer(1.0)
        with pytest.raises(TypeError, match="layer: expected an index"):
            m.layer(True)
        assert m.layer(np.int64(1)).name == m.layer(1).name


@pytest.mark.parametrize("threads", [2**32, 2**31, -(2**31) - 1, 2**64 + 1])
def test_threads_out_of_the_c_range(threads):
    """threads=2**32 ran with 0, threads=2**31 said 'got -2147483648'."""
    with libtrellis.Model(TOY_MODEL) as m:
        lay = m.layer(TOY_LAYER)
        x = np.ones((1, lay.k), np.float16)
        with pytest.raises(OverflowError, match=r"threads: %d does not fit the C int" % threads):
            lay.forward(x, threads=threads)
        with pytest.raises(TypeError, match="threads: expected an integer"):
            lay.forward(x, threads=1.5)
        with pytest.raises(TrellisError, match="threads: expected >= 0"):
            lay.forward(x, threads=-1)


def test_codebook_out_of_the_c_range():
    """Layer.from_arrays(codebook=2**32 + 1) built an MCG layer."""
    t = np.zeros((16, 8, 48), np.int16)
    ok = dict(suh=np.ones(256, np.float16), svh=np.ones(128, np.float16))
    with pytest.raises(OverflowError, match="codebook: 4294967297 does not fit"):
        libtrellis.Layer.from_arrays(t, codebook=2**32 + 1, **ok)
    with pytest.raises(TrellisError, match="weight.codebook"):
        libtrellis.Layer.from_arrays(t, codebook=7, **ok)
    assert libtrellis.Layer.from_arrays(t, codebook=1, **ok).codebook == "mcg"


# ----------------------------------------------------- NUL characters --


def test_nul_in_paths_and_names():
    """decode(path + '\\0junk', layer) opened `path`; a layer name with
    '\\0junk' appended found the layer."""
    path = case_path(CASES[0])
    layer = CASES[0]["layer"]
    with pytest.raises(ValueError, match="path: .* holds a NUL character at index"):
        libtrellis.decode(path + "\0junk", layer)
    with pytest.raises(ValueError, match="NUL"):
        libtrellis.Model(os.fsencode(path) + b"\0junk")
    with pytest.raises(ValueError, match="NUL"):
        libtrellis.read_safetensors(path + "\0")
    with pytest.raises(ValueError, match="NUL"):
        libtrellis.info(path + "\0x")
    with libtrellis.Model(path) as m:
        with pytest.raises(
            ValueError, match="layer: .* holds a NUL character at index %d" % len(layer)
        ):
            m.layer(layer + "\0junk")
        with pytest.raises(ValueError, match="name: .* NUL"):
            m.tensor(layer + ".suh\0junk")
        with pytest.raises(ValueError, match="NUL"):
            libtrellis.Layer.from_arrays(
                np.zeros((16, 8, 48), np.int16),
                suh=np.ones(256, np.float16),
                svh=np.ones(128, np.float16),
                codebook="mcg\0",
            )


# ------------------------------------------------------------ messages --


def test_big_endian_inputs_are_named():
    """A big-endian float16 x said 'dtype float16 is not supported ...
    (expected float16 or float32)'; a big-endian int16 array 'expected int16
    ..., got int16'."""
    with libtrellis.Model(TOY_MODEL) as m:
        lay = m.layer(TOY_LAYER)
        x = np.ones((1, lay.k), np.dtype(">f2"))
        with pytest.raises(TrellisError) as e:
            lay.forward(x)
        assert e.value.status == "TRELLIS_ERR_DTYPE"
        assert "big-endian float16 ('>f2')" in str(e.value)
        assert "byte order" in str(e.value)
        # the same values in the machine's order run
        assert np.array_equal(
            lay.forward(x.astype(np.float16)), lay.forward(np.ones((1, lay.k)).astype(np.float16))
        )
    t = np.zeros((16, 8, 48), np.dtype(">i2"))
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(t, suh=np.ones(256, np.float16), svh=np.ones(128, np.float16))
    assert "trellis: expected int16" in str(e.value)
    assert "got big-endian int16 ('>i2')" in str(e.value)
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(
            np.zeros((16, 8, 48), np.int16),
            suh=np.ones(256, np.dtype(">f2")),
            svh=np.ones(128, np.float16),
        )
    assert "suh: expected float16 [256], got big-endian float16 ('>f2')" in str(e.value)
