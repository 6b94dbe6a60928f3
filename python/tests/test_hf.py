# SPDX-License-Identifier: Apache-2.0
"""EXL3 checkpoints in Hugging Face transformers on the CPU: import
libtrellis.hf, AutoModelForCausalLM.from_pretrained, the last-token logits
against the same architecture with the dense weights (rel L2 <= 1e-2),
greedy generation eagerly and with a static cache. Skipped without torch
and transformers."""

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import libtrellis  # noqa: E402
from libtrellis import EXL3Linear, TrellisError  # noqa: E402

from hf_util import (  # noqa: E402
    HF_PRESETS,
    REL_L2,
    check_model,
    exl3_names,
    generate_both,
    load,
    static_decode_logits,
    synth_model,
    toy16_or_skip,
    tokens,
)

# The larger presets (70B: a 0.4 GB block and its 3.5 GB dense twin) run
# where LIBTRELLIS_HF_ALL_PRESETS=1; the 8B one always.
ALL = os.environ.get("LIBTRELLIS_HF_ALL_PRESETS") == "1"


@pytest.fixture(scope="module")
def synth8b(tmp_path_factory):
    return synth_model(tmp_path_factory.mktemp("hf"), "llama-3.1-8b")


def test_the_quantizer_is_registered():
    from transformers.quantizers import auto

    assert auto.AUTO_QUANTIZER_MAPPING["exl3"] is libtrellis.hf.EXL3HfQuantizer
    assert auto.AUTO_QUANTIZATION_CONFIG_MAPPING["exl3"] is libtrellis.hf.EXL3Config


@pytest.mark.parametrize(
    "preset",
    [
        (
            p
            if ALL or p == "llama-3.1-8b"
            else pytest.param(p, marks=pytest.mark.skip(reason="set LIBTRELLIS_HF_ALL_PRESETS=1"))
        )
        for p in HF_PRESETS
    ],
)
def test_synth_preset_logits_match_the_dense_model(tmp_path_factory, preset):
    path = synth_model(tmp_path_factory.mktemp("hf"), preset)
    model, rel = check_model(path)
    assert rel <= REL_L2, "%s: rel L2 %.3g" % (preset, rel)
    assert isinstance(model.lm_head, EXL3Linear) and model.lm_head.bits == 6
    print("%s (1 block): last-token logits rel L2 %.3g against the dense model" % (preset, rel))


def test_synth_generates(synth8b):
    model = load(synth8b)
    eager, static = generate_both(model, disable_compile=True)
    assert torch.equal(eager, static), (eager, static)


def test_toy_16_model(tmp_path):
    path = toy16_or_skip()
    model, rel = check_model(path)
    assert rel <= REL_L2, rel
    assert type(model.model.layers[1].mlp.up_proj) is torch.nn.Linear  # fp16 in the file
    assert isinstance(model.lm_head, EXL3Linear)
    eager, static = generate_both(model, disable_compile=True)
    assert torch.equal(eager, static)


def test_loading_options_and_shared_buffers(synth8b):
    config = libtrellis.hf.EXL3Config(max_m=32, threads=1)
    model = load(synth8b, quantization_config=config)
    mods = [model.get_submodule(n) for n in exl3_names(model)]
    assert {m.max_m for m in mods} == {32} and {m.threads for m in mods} == {1}
    assert len({id(m.buffers) for m in mods}) == 1
    assert model.libtrellis_buffers is mods[0].buffers
    # the options are not saved with the model's config
    saved = model.config.quantization_config.to_dict()
    assert "max_m" not in saved and saved["quant_method"] == "exl3" and saved["bits"] == 4.0
    # more rows than max_m run in pieces
    ids = tokens(model.config.vocab_size, 40)
    with torch.no_grad():
        assert model(ids).logits.shape == (1, 40, model.config.vocab_size)


def test_a_checkpoint_that_does_not_fit_the_architecture(tmp_path, synth8b):
    import json
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(synth8b, bad)
    with open(bad / "config.json") as f:
        config = json.load(f)
    config["intermediate_size"] = 8192
    with open(bad / "config.json", "w") as f:
        json.dump(config, f)
    with pytest.raises(TrellisError, match="mlp.down_proj is 14336 x 4096 in the checkpoint"):
        load(str(bad))


def test_compiled_decode_steps_on_a_static_cache(synth8b):
    """The whole forward traced with the operator (fullgraph; aot_eager, as
    the CPU has no CUDA graphs) on a static cache gives the eager logits."""
    model = load(synth8b)
    eager = static_decode_logits(model, model.forward)
    compiled = torch.compile(model.forward, backend="aot_eager", fullgraph=True)
    got = static_decode_logits(model, compiled)
    assert ((got - eager).norm() / eager.norm()).item() <= 1e-3
