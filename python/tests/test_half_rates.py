# SPDX-License-Identifier: Apache-2.0
"""ExLlamaV3 1.6 checkpoints at the NumPy level: the half-integer rates
(K 1.5 / 2.5 / 3.5, MUL1: tests/data/testvectors/half), the layers 1.6.5's
own quantizer wrote (exl3-real, against y_exact) and the toy 1.6 model."""

import json
import os

import numpy as np
import pytest

import libtrellis

from conftest import VECTORS, assert_close

HALF = os.path.join(VECTORS, "half")
REAL = os.path.join(VECTORS, "exl3-real")
TOY16 = os.path.join(HALF, "toy-exl3-1.6-model")


def cases(folder):
    with open(os.path.join(folder, "manifest.json")) as f:
        return [dict(c, folder=folder) for c in json.load(f)["cases"]]


ALL = cases(HALF) + cases(REAL)


@pytest.fixture(params=ALL, ids=[os.path.basename(c["folder"]) + "/" + c["name"] for c in ALL])
def case(request):
    return request.param


def paths(case):
    stem = os.path.join(case["folder"], case["name"])
    return stem + ".safetensors", stem + ".ref.safetensors"


def test_info_decode_and_forward(case):
    path, ref_path = paths(case)
    ref = libtrellis.read_safetensors(ref_path)
    layer = libtrellis.info(path)["layers"][0]
    assert layer["bits"] == case["bits"]  # 2.5 for a half rate
    assert layer["codebook"] == case["codebook"]
    w_hat = libtrellis.decode(path, case["layer"])
    np.testing.assert_array_equal(w_hat.view(np.uint16), ref["w_hat"].view(np.uint16))
    y = libtrellis.forward(path, case["layer"], ref["x"], device="cpu")
    assert_close(y, ref.get("y_exact", ref["y"]), what=case["name"])


def test_layer_from_arrays(case):
    path, ref_path = paths(case)
    t = libtrellis.read_safetensors(path)
    p = case["layer"] + "."
    layer = libtrellis.Layer.from_arrays(
        t[p + "trellis"],
        t[p + "suh"],
        t[p + "svh"],
        bias=t.get(p + "bias"),
        codebook=case["codebook"],
    )
    assert layer.bits == case["bits"]
    ref = libtrellis.read_safetensors(ref_path)
    np.testing.assert_array_equal(layer.decode().view(np.uint16), ref["w_hat"].view(np.uint16))


def test_half_rate_needs_mul1():
    t = libtrellis.read_safetensors(os.path.join(HALF, "k2p5_mul1_256x128.safetensors"))
    p = "model.layers.0.mlp.proj."
    with pytest.raises(libtrellis.TrellisError, match="only mul1"):
        libtrellis.Layer.from_arrays(t[p + "trellis"], t[p + "suh"], t[p + "svh"], codebook="mcg")


def test_toy_16_model():
    got = libtrellis.info(TOY16)
    q = got["quantization_config"]
    assert q["head_bits"] == 3.5
    assert q["out_scales"] == "auto"
    assert q["tie_word_embeddings"] is False
    bits = {row["name"]: row["bits"] for row in got["layers"]}
    assert bits["lm_head"] == 3.5
    assert bits["model.layers.0.mlp.gate_proj"] == 2.5
    assert bits["model.layers.0.self_attn.k_proj"] == 4
    assert "model.layers.1.mlp.up_proj" not in bits  # kept fp16
    with libtrellis.Model(TOY16) as m:
        for layer in m.layers():
            w_hat = layer.decode()
            assert w_hat.shape == (layer.k, layer.n)
            assert np.isfinite(w_hat.astype(np.float32)).all()
