# SPDX-License-Identifier: Apache-2.0
"""EXL3 checkpoints in Hugging Face transformers on a CUDA GPU: loaded with
device_map="cuda", the last-token logits against the dense model (rel L2 <=
1e-2), greedy generation eagerly, with a static cache under
torch.compile(mode="reduce-overhead") (CUDA graphs), and the layers' one
set of shared plan buffers. Skipped without a CUDA device, PyTorch with
CUDA, a CUDA build of libtrellis or transformers."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import libtrellis  # noqa: E402

if not (
    torch.cuda.is_available() and libtrellis.cuda_built() and libtrellis.cuda_device_count() > 0
):
    pytest.skip(
        "needs a CUDA device, PyTorch with CUDA and a CUDA build of libtrellis",
        allow_module_level=True,
    )

from libtrellis import EXL3Linear  # noqa: E402

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
)


def check_one_payload(model, path):
    """Each EXL3Linear holds its payload once (its buffer is the lane-layout
    tensor its plan reads), and the model's state_dict() gives the
    checkpoint's payload."""
    sd = model.state_dict()
    with libtrellis.Model(path) as m:
        for name in exl3_names(model):
            mod = model.get_submodule(name)
            assert mod.trellis.data_ptr() == mod.device_weight._tensors["trellis"].data_ptr()
            assert sd[name + ".trellis"].data_ptr() != mod.trellis.data_ptr()
            want = m.tensor(name + ".trellis")
            assert np.array_equal(sd[name + ".trellis"].cpu().numpy(), want), name


@pytest.mark.parametrize("preset", HF_PRESETS)
def test_synth_preset_on_cuda(tmp_path_factory, preset):
    path = synth_model(tmp_path_factory.mktemp("hfgpu"), preset)
    model, rel = check_model(path, "cuda")
    print(
        "%s (1 block, cuda): last-token logits rel L2 %.3g against the dense model" % (preset, rel)
    )
    assert rel <= REL_L2, rel
    mods = [model.get_submodule(n) for n in exl3_names(model)]
    assert all(m.device.type == "cuda" for m in mods)
    check_one_payload(model, path)
    # one set of buffers for the model, against one per layer
    per_layer = sum(sum(m._plan.buffer_needs().values()) for m in mods)
    shared = model.libtrellis_buffers.bytes()
    print("%s: plan buffers shared %d bytes, one set per layer %d" % (preset, shared, per_layer))
    assert shared <= per_layer
    eager, static = generate_both(model, "cuda")
    print("%s: eager %s, static cache + compile %s" % (preset, eager.tolist(), static.tolist()))
    assert torch.equal(eager, static)


def test_toy_16_model_on_cuda():
    path = toy16_or_skip()
    model, rel = check_model(path, "cuda")
    assert rel <= REL_L2, rel
    eager, static = generate_both(model, "cuda")
    assert torch.equal(eager, static)


def test_reduce_overhead_decode_step_matches_eager(tmp_path_factory):
    """Decode steps on a static cache under torch.compile(mode=
    "reduce-overhead", fullgraph=True): the compiled forward (CUDA graphs)
    gives the eager logits."""
    path = synth_model(tmp_path_factory.mktemp("hfgpu"), "llama-3.1-8b")
    model = load(path, device_map="cuda")
    eager = static_decode_logits(model, model.forward, "cuda", steps=4)
    compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    got = static_decode_logits(model, compiled, "cuda", steps=4)
    assert torch.isfinite(got).all()
    rel = ((got - eager).norm() / eager.norm()).item()
    print("reduce-overhead decode steps: rel L2 %.3g against eager" % rel)
    assert rel <= 1e-3
    assert isinstance(model.lm_head, EXL3Linear)
