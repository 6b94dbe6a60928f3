# SPDX-License-Identifier: Apache-2.0
"""The NumPy level against the known-answer vectors (runs on any machine)."""

import os
import re

import numpy as np
import pytest

import libtrellis
from libtrellis import TrellisError

from conftest import (
    CASES,
    TOY_MODEL,
    VECTORS,
    assert_close,
    case_path,
    ref_path,
)

TOY_PROJS = {
    "mlp.down_proj": (512, 256),
    "mlp.gate_proj": (256, 512),
    "mlp.up_proj": (256, 512),
    "self_attn.k_proj": (256, 128),
    "self_attn.o_proj": (256, 256),
    "self_attn.q_proj": (256, 256),
    "self_attn.v_proj": (256, 128),
}


def bits_of(a):
    """fp16 arrays compared as their bit patterns."""
    return np.ascontiguousarray(a).view(np.uint16)


def test_version_and_library():
    assert re.fullmatch(r"\d+\.\d+\.\d+", libtrellis.__version__)
    assert libtrellis.version() == libtrellis.__version__
    assert os.path.isfile(libtrellis.LIBRARY_PATH)
    assert isinstance(libtrellis.cuda_built(), bool)
    assert libtrellis.cuda_device_count() >= 0


def test_codebook_names_come_from_the_library():
    names = set(libtrellis.CODEBOOKS.values())
    assert {"3inst", "mcg", "mul1"} <= names
    assert "invalid" not in names


def test_info_of_every_vector(case):
    got = libtrellis.info(case_path(case))
    assert got["path"] == case_path(case)
    assert got["quantization_config"] is None
    assert got["other_tensors"] == 0
    assert len(got["layers"]) == 1
    layer = got["layers"][0]
    assert layer["name"] == case["layer"]
    assert (layer["k"], layer["n"]) == (case["k"], case["n"])
    assert layer["bits"] == case["bits"]
    assert layer["codebook"] == case["codebook"]
    assert layer["signs"] == ("legacy" if case["legacy_signs"] else "scaled")
    assert layer["bias"] == case["bias"]


def test_info_of_the_toy_model():
    got = libtrellis.info(TOY_MODEL)
    q = got["quantization_config"]
    assert q["quant_method"] == "exl3"
    assert q["version"] == "0.0.32"
    assert q["bits"] == pytest.approx(4.4)
    assert q["head_bits"] == 16
    assert q["codebook"] == "mcg"
    assert q["out_scales"] == "always"
    assert (q["calibration_rows"], q["calibration_cols"]) == (250, 2048)
    assert got["other_tensors"] == 2
    layers = got["layers"]
    assert len(layers) == 14
    for i, layer in enumerate(layers):
        proj = sorted(TOY_PROJS)[i % 7]
        assert layer["name"] == "model.layers.%d.%s" % (i // 7, proj)
        assert (layer["k"], layer["n"]) == TOY_PROJS[proj]
        assert 3 <= layer["bits"] <= 6
        assert layer["codebook"] == "mcg"
        assert layer["signs"] == "scaled"
        assert layer["bias"] is False


def test_decode_is_bit_exact(case):
    ref = libtrellis.read_safetensors(ref_path(case))
    w_hat = libtrellis.decode(case_path(case), case["layer"])
    assert w_hat.dtype == np.float16
    assert w_hat.shape == (case["k"], case["n"])
    np.testing.assert_array_equal(bits_of(w_hat), bits_of(ref["w_hat"]))


def test_dense_weight(case):
    ref = libtrellis.read_safetensors(ref_path(case))
    dense = libtrellis.decode(case_path(case), case["layer"], dense=True)
    assert dense.dtype == np.float32
    assert dense.shape == (case["k"], case["n"])
    assert_close(dense, ref["w_dense"], what="w_dense")


def test_forward_cpu(case):
    ref = libtrellis.read_safetensors(ref_path(case))
    x = ref["x"]
    assert x.dtype == np.float16 and x.shape == (case["m"], case["k"])
    y = libtrellis.forward(case_path(case), case["layer"], x, device="cpu")
    assert y.dtype == np.float32
    assert y.shape == (case["m"], case["n"])
    assert_close(y, ref["y"], what=case["name"])
    # fp32 x holding the same values gives the same bits (one rounding of
    # x * suh to fp16 either way)
    y32 = libtrellis.forward(case_path(case), case["layer"], x.astype(np.float32), device="cpu")
    np.testing.assert_array_equal(y32, y)


def test_forward_one_row_and_threads():
    case = next(c for c in CASES if c["name"] == "k5_mcg_384x640_m130")
    ref = libtrellis.read_safetensors(ref_path(case))
    with libtrellis.Model(case_path(case)) as m:
        layer = m.layer(case["layer"])
        y = layer.forward(ref["x"], threads=1)
        y4 = layer.forward(ref["x"], threads=4)
        np.testing.assert_array_equal(y, y4)
        row = layer.forward(ref["x"][5])
        assert row.shape == (case["n"],)
        np.testing.assert_array_equal(row, y[5])
        y16 = layer.forward(ref["x"], out_dtype=np.float16)
        assert y16.dtype == np.float16
        np.testing.assert_array_equal(y16, y.astype(np.float16))
        # a strided view is copied, not misread
        xs = np.repeat(ref["x"], 2, axis=0)[::2]
        assert not xs.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(layer.forward(xs), y)
        assert layer.forward(ref["x"][:0]).shape == (0, case["n"])


def test_forward_auto_is_the_cpu_without_a_gpu():
    case = CASES[0]
    ref = libtrellis.read_safetensors(ref_path(case))
    y = libtrellis.forward(case_path(case), case["layer"], ref["x"])
    if not libtrellis._core._cuda_usable():
        np.testing.assert_array_equal(
            y, libtrellis.forward(case_path(case), case["layer"], ref["x"], device="cpu")
        )
    assert_close(y, ref["y"])


def test_model_object():
    model = libtrellis.Model(TOY_MODEL)
    assert not model.closed and len(model) == 14
    assert "14 layers" in repr(model)
    names = model.layer_names()
    assert names == sorted(names) and len(names) == 14
    layer = model.layer("model.layers.1.self_attn.k_proj")
    assert (layer.k, layer.n, layer.bits, layer.codebook) == (256, 128, 6, "mcg")
    assert layer.signs == "scaled" and not layer.has_bias
    assert model.layer(8).name == "model.layers.1.mlp.gate_proj"
    assert [l.name for l in model] == names
    assert model.other_tensor_names() == [
        "model.layers.0.input_layernorm.weight",
        "model.layers.1.input_layernorm.weight",
    ]
    norm = model.tensor("model.layers.0.input_layernorm.weight")
    assert norm.dtype == np.float16 and norm.shape == (256,)
    payload = model.tensor("model.layers.1.self_attn.k_proj.trellis")
    assert payload.dtype == np.int16 and payload.shape == (16, 8, 96)
    w_hat = layer.decode()
    model.close()
    model.close()
    assert model.closed and "closed" in repr(model)
    with pytest.raises(ValueError, match="closed"):
        layer.decode()
    with pytest.raises(ValueError, match="closed"):
        model.layer(0)
    # arrays handed out stay valid after close
    assert w_hat.shape == (256, 128) and norm.sum() == norm.sum()


def test_model_context_manager_and_file():
    case = CASES[0]
    with libtrellis.Model(case_path(case)) as m:
        assert len(m) == 1
        assert m.quantization_config is None
    assert m.closed


def test_layer_from_arrays_matches_the_file(case):
    t = libtrellis.read_safetensors(case_path(case))
    p = case["layer"] + "."
    layer = libtrellis.Layer.from_arrays(
        t[p + "trellis"],
        t.get(p + "suh"),
        t.get(p + "svh"),
        su=t.get(p + "su"),
        sv=t.get(p + "sv"),
        bias=t.get(p + "bias"),
        codebook=case["codebook"],
        name="synthetic",
    )
    assert (layer.k, layer.n, layer.bits) == (case["k"], case["n"], case["bits"])
    ref = libtrellis.read_safetensors(ref_path(case))
    np.testing.assert_array_equal(bits_of(layer.decode()), bits_of(ref["w_hat"]))
    assert_close(layer.forward(ref["x"]), ref["y"])


def test_read_safetensors():
    case = CASES[0]
    ref = libtrellis.read_safetensors(ref_path(case))
    assert set(ref) == {"x", "w_hat", "w_dense", "y"}
    assert ref["y"].dtype == np.float32
    assert ref["y"].shape == (case["m"], case["n"])


# ------------------------------------------------------------------ errors --


def test_missing_file():
    path = os.path.join(VECTORS, "no-such-model.safetensors")
    for call in (
        lambda: libtrellis.info(path),
        lambda: libtrellis.decode(path, "x"),
        lambda: libtrellis.forward(path, "x", np.zeros(256, np.float16)),
        lambda: libtrellis.Model(path),
        lambda: libtrellis.read_safetensors(path),
    ):
        with pytest.raises(TrellisError) as e:
            call()
        assert path in str(e.value)
        assert e.value.status == "TRELLIS_ERR_NOT_FOUND"
        assert e.value.code == 7


def test_bad_layer_name():
    case = CASES[0]
    with pytest.raises(TrellisError) as e:
        libtrellis.decode(case_path(case), "model.layers.9.mlp.nothing")
    assert e.value.status == "TRELLIS_ERR_NOT_FOUND"
    assert "model.layers.9.mlp.nothing" in str(e.value)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(TrellisError, match="model.layers.0.mlp.none"):
        libtrellis.forward(case_path(case), "model.layers.0.mlp.none", np.zeros(256, np.float16))
    with libtrellis.Model(TOY_MODEL) as m:
        with pytest.raises(TrellisError) as e:
            m.layer(14)
        assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
        with pytest.raises(TrellisError) as e:
            m.tensor("model.embed_tokens")
        assert e.value.status == "TRELLIS_ERR_NOT_FOUND"


def test_library_message_is_the_exception_text():
    from libtrellis._lib import lib, text

    case = CASES[0]
    with pytest.raises(TrellisError) as e:
        libtrellis.decode(case_path(case), "nope")
    assert str(e.value) == text(lib.trellis_last_error())
    assert str(e.value)


@pytest.mark.parametrize("shape", [(3, 257), (257,), (3, 128), (2, 3, 255), (), (3, 0)], ids=str)
def test_wrong_x_shape(shape):
    case = CASES[0]
    x = np.zeros(shape, np.float16)
    with pytest.raises(TrellisError) as e:
        libtrellis.forward(case_path(case), case["layer"], x, device="cpu")
    assert e.value.status == "TRELLIS_ERR_SHAPE"
    assert "k = 256" in str(e.value) and case["layer"] in str(e.value)


def test_float64_and_leading_dims():
    case = next(c for c in CASES if c["name"] == "k6_mcg_512x256_m1_bias")
    ref = libtrellis.read_safetensors(ref_path(case))
    x32 = ref["x"].astype(np.float32)
    with libtrellis.Model(case_path(case)) as m:
        layer = m.layer(case["layer"])
        want = layer.forward(x32)
        # float64 is cast to float32: the same result
        assert np.array_equal(layer.forward(x32.astype(np.float64)), want)
        # [..., k]: the leading dimensions come back
        x3 = np.stack([x32, x32[::-1]])
        y3 = layer.forward(x3)
        assert y3.shape == (2,) + want.shape
        assert np.array_equal(y3[0], want) and np.array_equal(y3[1], want[::-1])
    y = libtrellis.forward(case_path(case), case["layer"], x3.astype(np.float64), device="cpu")
    assert y.shape == y3.shape and np.array_equal(y, y3)


def test_torch_tensors_get_a_clear_message():
    torch = pytest.importorskip("torch")
    case = CASES[0]
    x = torch.zeros(2, case["k"], dtype=torch.float16)
    with pytest.raises(TypeError, match=r"torch tensor.*\.cpu\(\)\.numpy\(\)"):
        libtrellis.forward(case_path(case), case["layer"], x, device="cpu")
    with pytest.raises(TypeError, match="EXL3Linear"):
        libtrellis.Layer.from_arrays(torch.zeros(16, 8, 64, dtype=torch.int16))


def test_exl3linear_without_torch_names_the_extra(monkeypatch):
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import libtrellis\n"
        "try:\n"
        "    libtrellis.EXL3Linear\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[torch]" in out.stdout and "pip install" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.bool_, np.complex64])
def test_wrong_x_dtype(dtype):
    case = CASES[0]
    with pytest.raises(TrellisError) as e:
        libtrellis.forward(case_path(case), case["layer"], np.zeros((2, 256), dtype))
    assert e.value.status == "TRELLIS_ERR_DTYPE"
    assert np.dtype(dtype).name in str(e.value)


def test_bad_device_and_out_dtype():
    case = CASES[0]
    x = np.zeros((1, 256), np.float16)
    with pytest.raises(TrellisError) as e:
        libtrellis.forward(case_path(case), case["layer"], x, device="tpu")
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
    with libtrellis.Model(case_path(case)) as m:
        with pytest.raises(TrellisError) as e:
            m.layer(0).forward(x, out_dtype=np.float64)
        assert e.value.status == "TRELLIS_ERR_DTYPE"


def test_cuda_without_a_usable_gpu():
    if libtrellis._core._cuda_usable():
        pytest.skip("a CUDA device is usable here")
    case = CASES[0]
    with pytest.raises(TrellisError) as e:
        libtrellis.forward(
            case_path(case), case["layer"], np.zeros((1, 256), np.float16), device="cuda"
        )
    assert e.value.status == "TRELLIS_ERR_NO_DEVICE"
    # the one wording of the library, the CLI and the package (without
    # torch the message says the cuda device needs it instead)
    want = libtrellis._core.NO_CUDA_BUILD
    if libtrellis.cuda_built():
        want = libtrellis._core.NO_CUDA_DEVICE
    if "needs PyTorch" not in str(e.value):
        assert want in str(e.value)


def test_bad_arrays():
    t = np.zeros((16, 8, 48), np.int16)
    ok = dict(suh=np.ones(256, np.float16), svh=np.ones(128, np.float16))
    libtrellis.Layer.from_arrays(t, **ok)
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(t.astype(np.int32), **ok)
    assert e.value.status == "TRELLIS_ERR_DTYPE"
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(t, suh=np.ones(255, np.float16), svh=ok["svh"])
    assert e.value.status == "TRELLIS_ERR_SHAPE" and "suh" in str(e.value)
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(t, svh=ok["svh"])
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(t, codebook="nope", **ok)
    assert "nope" in str(e.value)
    with pytest.raises(TrellisError) as e:
        libtrellis.Layer.from_arrays(np.zeros((1, 8, 48), np.int16), **ok)
    assert e.value.status in ("TRELLIS_ERR_SHAPE", "TRELLIS_ERR_INVALID_ARGUMENT")
    if libtrellis._lib.has("trellis_weight_check_values"):
        suh = ok["suh"].copy()
        suh[3] = np.inf
        with pytest.raises(TrellisError) as e:
            libtrellis.Layer.from_arrays(t, suh=suh, svh=ok["svh"])
        assert "suh" in str(e.value)


# ------------------------------------------- codebooks and pairs of b12x --

B12X = os.path.join(VECTORS, "b12x")
B12X_CASES = []
if os.path.isfile(os.path.join(B12X, "manifest.json")):
    import json

    with open(os.path.join(B12X, "manifest.json")) as f:
        B12X_CASES = json.load(f)["cases"]


@pytest.mark.skipif(not B12X_CASES, reason="no b12x vectors in this tree")
@pytest.mark.parametrize("case", B12X_CASES, ids=[c["name"] for c in B12X_CASES])
def test_b12x_vectors(case):
    path = os.path.join(B12X, case["name"] + ".safetensors")
    ref = libtrellis.read_safetensors(os.path.join(B12X, case["name"] + ".ref.safetensors"))
    bits = case["bits"] if isinstance(case["bits"], list) else [case["bits"]]
    row = libtrellis.info(path)["layers"][0]
    assert (row["k"], row["n"], row["bits"]) == (case["k"], case["n"], bits[0])
    assert row["codebook"] == case["codebook"]
    assert row["pair"] == case.get("pair_kind")
    assert row["rate_axis"] == case.get("rate_axis")
    with libtrellis.Model(path) as m:
        layer = m.layer(case["layer"])
        assert layer.codebook == case["codebook"]
        assert layer.pair == case.get("pair_kind")
        if layer.pair:
            assert [layer.bits, layer.bits1] == bits
        np.testing.assert_array_equal(bits_of(layer.decode()), bits_of(ref["w_hat"]))
        assert_close(layer.forward(ref["x"]), ref["y"], max_tol=1.0, what=case["name"])
