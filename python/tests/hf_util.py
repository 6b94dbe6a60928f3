# SPDX-License-Identifier: Apache-2.0
"""Helpers of the transformers tests: EXL3 models to load (the 1.6 toy
model of tests/data, synthetic ones written by `trellis synth`) and the
same architecture built with the dense weights."""

import copy
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

import libtrellis
from libtrellis import TrellisError

from conftest import ROOT, VECTORS

transformers = pytest.importorskip("transformers")
import libtrellis.hf  # noqa: E402,F401  (registers the quantizer)
from libtrellis import EXL3Linear  # noqa: E402

TOY16_MODEL = os.path.join(VECTORS, "half", "toy-exl3-1.6-model")
# Presets transformers can build; glm-tp4 is one tensor-parallel rank of a
# GLM-style block ("GlmTp4Shard"), which no transformers architecture is.
HF_PRESETS = ["llama-3.1-8b", "llama-3.1-70b"]
REL_L2 = 1e-2


def trellis_cli():
    """The `trellis` program: $TRELLIS_CLI, on PATH, or in a build folder."""
    env = os.environ.get("TRELLIS_CLI")
    if env:
        return env
    found = shutil.which("trellis")
    if found:
        return found
    for build in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, build, "trellis")
        if build.startswith("build") and os.access(path, os.X_OK) and os.path.isfile(path):
            return path
    return None


def synth_model(tmp_dir, preset, blocks=1, vocab=256, **options):
    """A synthetic EXL3 model directory of `preset` cut to `blocks`."""
    cli = trellis_cli()
    if cli is None:
        pytest.skip("no `trellis` program to write synthetic models (set TRELLIS_CLI)")
    out = os.path.join(str(tmp_dir), "%s-%d" % (preset, blocks))
    args = [cli, "synth", preset, out, "--blocks", str(blocks), "--vocab", str(vocab), "--force"]
    for key, value in options.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return out


def toy16_or_skip():
    """The 1.6 toy model, or a skip where this library refuses its
    half-integer rates (K = 2.5 and 3.5)."""
    try:
        libtrellis.info(TOY16_MODEL)
    except TrellisError as e:
        pytest.skip(
            "this libtrellis refuses the 1.6 toy model's half-integer rates "
            "(K = 2.5/3.5): %s" % e
        )
    return TOY16_MODEL


def load(path, **kwargs):
    kwargs.setdefault("dtype", torch.float16)
    return transformers.AutoModelForCausalLM.from_pretrained(path, **kwargs)


def exl3_names(model):
    return [name for name, m in model.named_modules() if isinstance(m, EXL3Linear)]


def dense_twin(model, path, device="cpu"):
    """The model's architecture with every EXL3 layer an nn.Linear of the
    layer's dense weight (trellis_dense_weight, what `trellis decode
    --dense` writes) and the other tensors copied, in float32."""
    config = copy.deepcopy(model.config)
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    ref = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    names = set(exl3_names(model))
    state = {}
    for key, value in model.state_dict().items():
        if key.rpartition(".")[0] not in names:
            state[key] = value.float().cpu()
    with libtrellis.Model(path) as m:
        for name in names:
            layer = m.layer(name)
            state[name + ".weight"] = torch.from_numpy(
                np.ascontiguousarray(layer.decode(dense=True).T)
            )
            if layer.has_bias:
                state[name + ".bias"] = torch.from_numpy(m.tensor(name + ".bias")).float()
    missing, unexpected = ref.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all("rotary" in k or "inv_freq" in k for k in missing), missing
    return ref.to(device).eval()


def tokens(vocab, count, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, count), generator=g)


def rel_l2(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm()).item()


def check_model(path, device="cpu"):
    """Loads the EXL3 model on `device`, checks its modules and tensors,
    and returns (model, rel L2 of its last-token logits against the dense
    twin's)."""
    kwargs = {"device_map": device} if device != "cpu" else {}
    model = load(path, **kwargs)
    names = exl3_names(model)
    with libtrellis.Model(path) as m:
        assert sorted(names) == sorted(m.layer_names())
        others = m.other_tensor_names()
        state = model.state_dict()
        for key in others:  # norms, embeddings, fp16 heads and Linears: as stored
            want = torch.from_numpy(m.tensor(key))
            assert torch.equal(state[key].cpu(), want.to(state[key].dtype)), key
        for name in names:  # the EXL3 layers' tensors: as stored too
            for suffix in ("trellis", "suh", "svh"):
                assert torch.equal(
                    state[name + "." + suffix].cpu(),
                    torch.from_numpy(m.tensor(name + "." + suffix)),
                ), name
    for key in others:  # a Linear kept in fp16 stays an nn.Linear
        if key.endswith("proj.weight") or key == "lm_head.weight":
            assert type(model.get_submodule(key[: -len(".weight")])) is torch.nn.Linear, key
    vocab = model.config.vocab_size
    ids = tokens(vocab, 12).to(device)
    with torch.no_grad():
        got = model(ids).logits[0, -1].float()
        ref = dense_twin(model, path, device)
        want = ref(ids).logits[0, -1]
    assert torch.isfinite(got).all()
    return model, rel_l2(got, want)


def generate_both(model, device="cpu", new_tokens=6, **static_kwargs):
    """Greedy generation eagerly (dynamic cache) and with a static cache."""
    ids = tokens(model.config.vocab_size, 5, seed=1).to(device)
    eager = model.generate(ids, max_new_tokens=new_tokens, do_sample=False)
    static = model.generate(
        ids,
        max_new_tokens=new_tokens,
        do_sample=False,
        cache_implementation="static",
        **static_kwargs,
    )
    assert eager.shape == static.shape == (1, 5 + new_tokens)
    return eager, static


def static_decode_logits(model, forward, device="cpu", steps=3):
    """Logits of `steps` greedy decode steps of one token after a 6-token
    prefill, on a static cache, with `forward` (model.forward or a compiled
    one) for the steps."""
    from transformers import StaticCache

    ids = tokens(model.config.vocab_size, 6).to(device)
    cache = StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad():
        pos = torch.arange(ids.shape[1], device=device)
        out = model(ids, past_key_values=cache, cache_position=pos, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)
        logits = []
        for step in range(steps):
            p = torch.tensor([ids.shape[1] + step], device=device)
            out = forward(nxt, past_key_values=cache, cache_position=p, use_cache=True)
            logits.append(out.logits[0, -1].float().clone())
            nxt = out.logits[:, -1:].argmax(-1)
    return torch.stack(logits)
