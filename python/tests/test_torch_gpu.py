# SPDX-License-Identifier: Apache-2.0
"""The PyTorch level on a CUDA GPU: EXL3Linear against the CPU reference,
CUDA graphs, torch.compile, streams and bad input. Skipped without PyTorch,
a CUDA device or a CUDA build of the library."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import libtrellis
from libtrellis import TrellisError

from conftest import CASES, TOY_MODEL, case_path, ref_path

torch = pytest.importorskip("torch")
if not (
    torch.cuda.is_available() and libtrellis.cuda_built() and libtrellis.cuda_device_count() > 0
):
    pytest.skip(
        "needs a CUDA device, PyTorch with CUDA and a CUDA build of libtrellis",
        allow_module_level=True,
    )

from libtrellis import DeviceWeight, EXL3Linear  # noqa: E402

DEV = torch.device("cuda", torch.cuda.current_device())
BY_NAME = {c["name"]: c for c in CASES}
# K6/MCG takes the fused path at small m; the others the generic one.
FUSED = ["k6_mcg_1024x512_m17", "k6_mcg_512x256_m1_bias"]
GENERIC = ["k4_mul1_512x1024_m1", "k3_3inst_256x256_legacy", "k5_mcg_384x640_m130"]
MS = [1, 7, 128, 300]
DTYPES = [torch.float16, torch.bfloat16]


def layer_of(name):
    return BY_NAME[name]["layer"], case_path(BY_NAME[name])


def random_x(shape, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, k, generator=g).to(dtype).to(DEV)


def cpu_reference(path, name, x):
    """The library's CPU forward of x (any float dtype, exact in fp32), fp32."""
    with libtrellis.Model(path) as m:
        xs = x.float().cpu().numpy()
        return torch.from_numpy(m.layer(name).forward(xs.reshape(-1, xs.shape[-1])))


def check_close(y, ref, out_dtype, path, what):
    """The C GPU tests' tolerances against the CPU reference rounded to the
    output dtype (the library's CPU forward rounds its output once, at the
    end): relative L2 2e-3 and max|d|/max|y| 2e-3 (3e-3 on the dense path,
    which folds the rotations into the weight). A bf16 output differs where
    the two sums straddle a rounding point, by one bf16 ulp (2^-8..2^-7 of
    the value): relative L2 4e-3, max 8e-3."""
    ref = ref.to(out_dtype).double()
    y = y.double().cpu().reshape(ref.shape)
    assert torch.isfinite(y).all(), what
    rel = ((y - ref).norm() / ref.norm()).item()
    mx = ((y - ref).abs().max() / ref.abs().max()).item()
    if out_dtype == torch.bfloat16:
        rel_tol, max_tol = 4e-3, 8e-3
    else:
        rel_tol, max_tol = 2e-3, (3e-3 if path == "dense" else 2e-3)
    assert rel <= rel_tol and mx <= max_tol, "%s (%s): rel L2 %.3g, max|d|/max|y| %.3g" % (
        what,
        path,
        rel,
        mx,
    )


_modules = {}


def module(case_name, dtype, max_m=300, **kw):
    key = (case_name, dtype, max_m, tuple(sorted(kw.items())))
    if key not in _modules:
        name, path = layer_of(case_name)
        _modules[key] = EXL3Linear(path, name, max_m=max_m, dtype=dtype, **kw)
    return _modules[key]


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("case_name", FUSED + GENERIC)
def test_parity_with_the_cpu_reference(case_name, dtype, m):
    name, path = layer_of(case_name)
    for out_dtype in (dtype, torch.float32):
        mod = module(case_name, dtype, out_dtype=out_dtype)
        x = random_x((m,), mod.in_features, dtype, seed=m)
        y = mod(x)
        assert y.shape == (m, mod.out_features)
        assert y.dtype == out_dtype and y.device == DEV
        torch.cuda.synchronize()
        what = "%s %s -> %s" % (case_name, dtype, out_dtype)
        check_close(y, cpu_reference(path, name, x), out_dtype, mod.path(m), what)


def test_fused_and_generic_paths_are_exercised():
    seen = {}
    for case_name in FUSED + GENERIC:
        mod = module(case_name, torch.float16)
        seen[case_name] = [mod.path(m) for m in MS]
    for case_name in FUSED:
        assert seen[case_name][:3] == ["fused"] * 3, seen
    for case_name in GENERIC:
        assert seen[case_name][0] == "generic", seen
    assert "dense" in sum(seen.values(), []), seen


@pytest.mark.parametrize(
    "flags",
    [
        libtrellis.PLAN_FORCE_GENERIC,
        libtrellis.PLAN_EXACT_WEIGHTS,
        libtrellis.PLAN_LEGACY_KERNELS,
        libtrellis.PLAN_NO_DEPENDENT_LAUNCH,
        libtrellis.PLAN_FORCE_GENERIC | libtrellis.PLAN_FORCE_DECODE,
    ],
)
def test_plan_flags(flags):
    case_name = FUSED[0]
    mod = module(case_name, torch.float16, flags=flags)
    name, path = layer_of(case_name)
    if flags & libtrellis.PLAN_FORCE_GENERIC:
        assert mod.path(7) == "generic"
    for m in (1, 7, 300):
        x = random_x((m,), mod.in_features, torch.float16, seed=100 + m)
        check_close(mod(x), cpu_reference(path, name, x), torch.float16, mod.path(m), "flags")


def test_known_answer_vectors():
    for case in CASES:
        ref = libtrellis.read_safetensors(ref_path(case))
        mod = EXL3Linear(case_path(case), case["layer"], max_m=case["m"], out_dtype=torch.float32)
        y = mod(torch.from_numpy(ref["x"]).to(DEV))
        check_close(y, torch.from_numpy(ref["y"]), torch.float32, mod.path(case["m"]), case["name"])


def test_numpy_forward_on_cuda():
    case = BY_NAME["k6_mcg_1024x512_m17"]
    ref = libtrellis.read_safetensors(ref_path(case))
    for device in ("cuda", "auto"):
        y = libtrellis.forward(case_path(case), case["layer"], ref["x"], device=device)
        assert y.dtype == np.float32 and y.shape == ref["y"].shape
        check_close(torch.from_numpy(y), torch.from_numpy(ref["y"]), torch.float32, "", device)
    row = libtrellis.forward(case_path(case), case["layer"], ref["x"][3].astype(np.float32), "cuda")
    assert row.shape == (case["n"],)


def test_leading_batch_shapes():
    mod = module(GENERIC[0], torch.float16)
    x = random_x((2, 3), mod.in_features, torch.float16, seed=5)
    y = mod(x)
    assert y.shape == (2, 3, mod.out_features)
    assert torch.equal(y, mod(x.reshape(6, -1)).reshape(2, 3, -1))
    one = mod(x[0, 0])
    assert one.shape == (mod.out_features,)
    assert torch.equal(one, mod(x[0, 0].reshape(1, -1))[0])
    empty = mod(x[:0])
    assert empty.shape == (0, 3, mod.out_features)


@pytest.mark.parametrize("case_name", [FUSED[0], GENERIC[0]])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_cuda_graph_replays_bit_equal(case_name, dtype):
    mod = module(case_name, dtype, max_m=64)
    x = random_x((7,), mod.in_features, dtype, seed=11)
    eager = mod(x).clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            mod(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = mod(x)
    for _ in range(100):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)
    # new values in the captured input
    x2 = random_x((7,), mod.in_features, dtype, seed=12)
    x.copy_(x2)
    out.fill_(float("nan"))
    graph.replay()
    assert torch.equal(out, mod(x2))


def test_compile_fullgraph_matches_eager():
    up = module("k4_mul1_512x1024_m1", torch.float16, max_m=64)
    down = EXL3Linear(TOY_MODEL, "model.layers.0.mlp.down_proj", max_m=64)
    assert (up.out_features, down.in_features) == (1024, 512)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = up, down

        def forward(self, x):
            h = self.up(x)
            return self.down(h[..., :512].contiguous())

    block = Block()
    x = random_x((2, 5), 512, torch.float16, seed=21)
    eager = block(x)
    compiled = torch.compile(block, fullgraph=True)
    assert torch.equal(compiled(x), eager)
    single = torch.compile(up, fullgraph=True)
    assert torch.equal(single(x), up(x))
    # the op's own fake implementation checks x while tracing
    with pytest.raises(Exception, match="expected \\[\\.\\.\\., 512\\]"):
        torch.compile(up, fullgraph=True)(random_x((3,), 256, torch.float16, seed=1))


def test_compile_reduce_overhead():
    mod = module(FUSED[0], torch.float16, max_m=64)
    compiled = torch.compile(mod, mode="reduce-overhead", fullgraph=True)
    for seed in range(6):
        x = random_x((4,), mod.in_features, torch.float16, seed=30 + seed)
        y = compiled(x)
        assert torch.equal(y, mod(x)), seed


def test_two_modules_of_one_weight_on_two_streams():
    name, path = layer_of(FUSED[0])
    with libtrellis.Model(path) as m:
        weight = DeviceWeight.upload(m.layer(name))
    a = EXL3Linear(weight, max_m=32)
    b = a.shared()
    assert b.device_weight is weight and a._plan_id != b._plan_id
    g = EXL3Linear(path, name, max_m=300, flags=libtrellis.PLAN_FORCE_GENERIC)
    xs = [random_x((16,), a.in_features, torch.float16, seed=40 + i) for i in range(8)]
    want = [a(x) for x in xs]
    want_g = [g(x) for x in xs]
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for _ in range(10):
        got1, got2 = [], []
        s1.wait_stream(torch.cuda.current_stream())
        s2.wait_stream(torch.cuda.current_stream())
        for x in xs:
            with torch.cuda.stream(s1):
                got1.append(a(x))
            with torch.cuda.stream(s2):
                got2.append(b(x))
        torch.cuda.synchronize()
        for w, y1, y2 in zip(want, got1, got2):
            assert torch.equal(y1, w) and torch.equal(y2, w)
    # a generic-path module beside a fused one, each on its own stream
    with torch.cuda.stream(s1):
        y1 = [a(x) for x in xs]
    with torch.cuda.stream(s2):
        y2 = [g(x) for x in xs]
    torch.cuda.synchronize()
    assert all(torch.equal(p, q) for p, q in zip(y1, want))
    assert all(torch.equal(p, q) for p, q in zip(y2, want_g))
    a.close()
    b.close()
    with pytest.raises(TrellisError, match="closed"):
        a(xs[0])


def test_bad_input_raises_and_leaves_the_module_usable():
    mod = module(GENERIC[0], torch.float16, max_m=16)
    k = mod.in_features
    good = random_x((3,), k, torch.float16, seed=50)
    want = mod(good)
    bad = [
        (good.cpu(), "TRELLIS_ERR_INVALID_ARGUMENT", "cpu"),
        (good.float(), "TRELLIS_ERR_DTYPE", "float32"),
        (good.to(torch.bfloat16), "TRELLIS_ERR_DTYPE", "bfloat16"),
        (random_x((3,), k + 16, torch.float16, seed=1), "TRELLIS_ERR_SHAPE", str(k)),
        (random_x((17,), k, torch.float16, seed=1), "TRELLIS_ERR_SHAPE", "max_m = 16"),
        (random_x((5, 4), k, torch.float16, seed=1), "TRELLIS_ERR_SHAPE", "20 rows"),
        (
            random_x((2,), 2 * k, torch.float16, seed=1)[:, ::2],
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "contiguous",
        ),
        (
            random_x((k,), 3, torch.float16, seed=1).t(),
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "contiguous",
        ),
        (torch.zeros((), dtype=torch.float16, device=DEV), "TRELLIS_ERR_SHAPE", "expected"),
    ]
    for x, status, text in bad:
        with pytest.raises(TrellisError) as e:
            mod(x)
        assert e.value.status == status, (str(e.value), status)
        assert text in str(e.value) and mod.layer_name in str(e.value)
        assert torch.equal(mod(good), want)
    with pytest.raises(TrellisError, match="not a tensor"):
        mod(good.cpu().numpy())
    with pytest.raises(TrellisError, match="closed or was never made"):
        torch.ops.libtrellis.exl3_linear(good, 10**9, mod.out_features, torch.float16)
    torch.cuda.synchronize()
    assert torch.equal(mod(good), want)


def test_bad_construction():
    name, path = layer_of(FUSED[0])
    with pytest.raises(TrellisError) as e:
        EXL3Linear(path, "model.layers.7.nothing")
    assert e.value.status == "TRELLIS_ERR_NOT_FOUND"
    with pytest.raises(TrellisError) as e:
        EXL3Linear(path, name, dtype=torch.int8)
    assert e.value.status == "TRELLIS_ERR_DTYPE"
    with pytest.raises(TrellisError) as e:
        EXL3Linear(path, name, max_m=0)
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT" and "max_m" in str(e.value)
    with pytest.raises(TrellisError) as e:
        EXL3Linear(path, name, device="meta")
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
    with pytest.raises(TypeError):
        EXL3Linear(path)


def test_from_tensors_and_from_model():
    case = BY_NAME["k6_mcg_512x256_m1_bias"]
    t = libtrellis.read_safetensors(case_path(case))
    p = case["layer"] + "."
    ref_mod = EXL3Linear(case_path(case), case["layer"], max_m=8)
    x = random_x((5,), case["k"], torch.float16, seed=60)
    want = ref_mod(x)
    parts = {f: torch.from_numpy(t[p + f]) for f in ("trellis", "suh", "svh", "bias")}
    host = EXL3Linear.from_tensors(codebook="mcg", max_m=8, **parts)
    assert torch.equal(host(x), want)
    on_dev = {f: v.to(DEV) for f, v in parts.items()}
    # a misaligned view is copied, an aligned one used in place
    big = torch.zeros(case["n"] + 1, dtype=torch.float16, device=DEV)
    big[1:] = on_dev["svh"]
    on_dev["svh"] = big[1:]
    payload = on_dev["trellis"].clone()
    dev = EXL3Linear.from_tensors(codebook="mcg", max_m=8, name="synthetic", **on_dev)
    assert dev.layer_name == "synthetic"
    assert torch.equal(dev(x), want)
    # the payload runs from a lane-layout copy; the caller's tensor is kept
    assert torch.equal(on_dev["trellis"], payload)
    with pytest.raises(TrellisError) as e:
        EXL3Linear.from_tensors(on_dev["trellis"], on_dev["suh"], parts["svh"])
    assert "mix" in str(e.value)
    with pytest.raises(TrellisError) as e:
        EXL3Linear.from_tensors(on_dev["trellis"], on_dev["suh"].float(), on_dev["svh"])
    assert e.value.status == "TRELLIS_ERR_DTYPE"

    mods = EXL3Linear.from_model(TOY_MODEL, max_m=4)
    assert len(mods) == 14
    info = {row["name"]: row for row in libtrellis.info(TOY_MODEL)["layers"]}
    assert set(mods) == set(info)
    for name, mod in mods.items():
        assert (mod.in_features, mod.out_features) == (info[name]["k"], info[name]["n"])
        x = random_x((2,), mod.in_features, torch.float16, seed=70)
        check_close(mod(x), cpu_reference(TOY_MODEL, name, x), torch.float16, mod.path(2), name)


def test_modules_free_their_device_memory():
    name, path = layer_of(FUSED[0])
    with libtrellis.Model(path) as m:
        layer = m.layer(name)

        def cycle():
            for _ in range(20):
                mod = EXL3Linear(layer, max_m=256)
                mod(random_x((1,), mod.in_features, torch.float16, seed=0))
                del mod
            gc.collect()
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            return torch.cuda.mem_get_info()[0]

        cycle()
        before = cycle()
        after = min(cycle() for _ in range(5))
    # 100 uploads of this layer are ~40 MB: a leak shows
    assert before - after < 8 * 2**20, (before, after)


def test_opcheck():
    mod = module(FUSED[0], torch.float16, max_m=64)
    x = random_x((7,), mod.in_features, torch.float16, seed=80)
    torch.library.opcheck(
        torch.ops.libtrellis.exl3_linear.default,
        (x, mod._plan_id, mod.out_features, torch.float16),
    )


def test_capture_of_a_swapped_model():
    """The example's flow, kept as a test."""
    here = os.path.dirname(os.path.abspath(__file__))
    example = os.path.join(here, "..", "examples", "swap_linears.py")
    ns = {"__name__": "swap_linears", "__file__": example}
    with open(example) as f:
        exec(compile(f.read(), example, "exec"), ns)
    assert ns["main"](["--replays", "20"]) == 0


def test_to_moves_between_the_cpu_and_cuda_and_replans():
    name, path = layer_of(FUSED[0])
    mod = EXL3Linear(path, name, device="cpu", max_m=64)
    x = random_x((5,), mod.in_features, torch.float16, seed=90)
    on_cpu = mod(x.cpu())
    assert mod.path(5) == "cpu"
    mod.to(DEV)
    assert mod.device == DEV and mod.trellis.is_cuda and mod.path(5) == "fused"
    y = mod(x)
    check_close(y, on_cpu.float(), torch.float16, "fused", "cpu -> cuda")
    mod.cpu()
    assert torch.equal(mod(x.cpu()), on_cpu)
    # state_dict from the GPU module loads into a CPU one and back
    gpu = EXL3Linear(path, name, max_m=64)
    sd = gpu.state_dict()
    assert all(t.is_cuda for t in sd.values())
    cpu = EXL3Linear(path, name, device="cpu")
    cpu.load_state_dict(sd)
    assert torch.equal(cpu(x.cpu()), on_cpu)


def test_shared_buffers_are_sized_by_the_plans_buffer_sizes():
    mods = EXL3Linear.from_model(TOY_MODEL, max_m=64)
    buffers = next(iter(mods.values())).buffers
    assert all(m.buffers is buffers for m in mods.values())
    plans = [m._plan for m in mods.values()]
    want = dict.fromkeys(("rotated", "input_f16", "output_f16", "workspace"), 0)
    for m in range(1, 65):
        sizes = libtrellis._torch._plans_sizes(plans, m)
        for key in want:
            want[key] = max(want[key], getattr(sizes, key + "_bytes"))
    assert buffers.sizes(DEV) == want
    one_each = sum(sum(p.buffer_needs().values()) for p in plans)
    assert buffers.bytes(DEV) == sum(want.values()) < one_each
    # the layers run one after another on one stream, captured in a graph
    x = random_x((3,), 256, torch.float16, seed=91)
    chain = [mods["model.layers.0.mlp.up_proj"], mods["model.layers.0.mlp.down_proj"]]

    def step(v):
        return chain[1](chain[0](v))

    eager = step(x).clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step(x)
    for _ in range(10):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, eager)


def test_the_eager_fast_path_and_the_operator_agree():
    mod = module(FUSED[0], torch.float16, max_m=64)
    x = random_x((7,), mod.in_features, torch.float16, seed=92)
    direct = mod(x)
    via_op = torch.ops.libtrellis.exl3_linear(x, mod._plan_id, mod.out_features, torch.float16)
    assert torch.equal(direct, via_op)


# ------------------------------------------------------ host threads --


def test_modules_of_one_weight_from_several_host_threads():
    """Four host threads, each running its own module of one device weight
    on its own stream, get what one thread gets."""
    name, path = layer_of(FUSED[0])
    with libtrellis.Model(path) as m:
        weight = DeviceWeight.upload(m.layer(name))
    mods = [EXL3Linear(weight, max_m=16) for _ in range(4)]
    xs = [random_x((8,), mods[0].in_features, torch.float16, seed=90 + i) for i in range(4)]
    want = [mods[0](x) for x in xs]
    torch.cuda.synchronize()
    errors = []

    def work(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                ys = [mods[i](xs[i]) for _ in range(50)]
            stream.synchronize()
            assert all(torch.equal(y, want[i]) for y in ys)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(mod.device_weight is weight for mod in mods)
    with pytest.raises(RuntimeError, match="still used by 4 plan"):
        weight.close()
    for mod in mods:
        mod.close()
    weight.close()


def test_close_while_another_thread_runs():
    """A module closed while another host thread runs it: the plan is
    destroyed when the running call returns; later calls say it is closed."""
    name, path = layer_of(GENERIC[0])
    mod = EXL3Linear(path, name, max_m=16)
    x = random_x((4,), mod.in_features, torch.float16, seed=95)
    want = mod(x)
    torch.cuda.synchronize()
    runs, errors = [0], []

    def work():
        stream = torch.cuda.Stream()
        try:
            with torch.cuda.stream(stream):
                while True:
                    y = mod(x)
                    stream.synchronize()
                    if not torch.equal(y, want):
                        errors.append("a run differs")
                    runs[0] += 1
        except (TrellisError, ValueError) as exc:
            if "closed" not in str(exc):
                errors.append(exc)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.3)
    mod.close()
    t.join(timeout=60)
    assert not t.is_alive()
    assert not errors, errors
    assert runs[0] > 0


# ------------------------------------------------ the payload, held once --


def allocated():
    gc.collect()
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated(DEV)


def block(nbytes):
    """The bytes the caching allocator counts for an allocation below 1 MiB
    (blocks of 512 bytes)."""
    return max(512, (nbytes + 511) // 512 * 512)


def active_blocks():
    """The caching allocator's live blocks: address -> size."""
    gc.collect()
    return {
        b["address"]: b["size"]
        for seg in torch.cuda.memory_snapshot()
        for b in seg["blocks"]
        if b["state"] == "active_allocated"
    }


def held_once(mod):
    """What memory_allocated should count for a CUDA module: each of its
    buffers once (the payload among them, in the lane layout its plan
    reads) and its SharedBuffers' plan buffers."""
    tensors = sum(block(t.nbytes) for t in mod._buffers.values())
    return tensors + sum(block(v) for v in mod.buffers.sizes(DEV).values() if v)


def checkpoint_tensors(path, name, keys):
    with libtrellis.Model(path) as m:
        return {key: m.tensor(name + "." + key) for key in keys}


def test_a_cuda_module_holds_its_payload_once():
    """Made, state_dict()ed, moved to the CPU and back, reloaded, shared: a
    CUDA module's device memory (torch.cuda.memory_allocated) is its
    tensors with one payload, the lane-layout tensor its plan reads, and
    state_dict() gives the checkpoint's tensors."""
    name, path = layer_of(FUSED[0])  # 1024 x 512 K6: a 384 KiB payload
    payload = 1024 * 512 * 6 // 8
    x = random_x((5,), 1024, torch.float16, seed=120)
    warm = EXL3Linear(path, name, max_m=16)  # the allocator's pools, the conversion's tables
    warm.state_dict()
    del warm
    base = allocated()
    mod = EXL3Linear(path, name, max_m=16)
    assert mod.trellis.nbytes == payload and mod._layout == libtrellis._lib.LAYOUT_LANES
    assert mod.trellis.data_ptr() == mod.device_weight._tensors["trellis"].data_ptr()
    want = held_once(mod)
    grown = allocated() - base
    assert grown == want, "allocated %d bytes, one payload's worth %d" % (grown, want)
    y = mod(x).cpu()  # kept on the host: the device holds the module alone
    # the checkpoint's tensors, converted copies of the payload that go again
    stored = checkpoint_tensors(path, name, ("trellis", "suh", "svh", "mcg"))
    sd = mod.state_dict()
    assert set(sd) == set(stored)
    for key, t in sd.items():
        assert t.is_cuda and np.array_equal(t.cpu().numpy(), stored[key]), key
    del sd
    assert allocated() - base == want
    # to the host (the payload in the checkpoint layout there) and back:
    # the device keeps the shared plan buffers. After the transformers GPU
    # tests (not alone) one 512-byte block of the module's stays allocated,
    # allocated before the move (no block is new; owner not found yet):
    # at most that residue, and the moves back do not add to it.
    before = active_blocks()
    mod.cpu()
    assert np.array_equal(mod.trellis.numpy(), stored["trellis"])
    left = allocated() - base
    new = [b for a, b in active_blocks().items() if a not in before]
    shared = sum(block(v) for v in mod.buffers.sizes(DEV).values() if v)
    residue = left - shared
    assert not new and residue in (0, 512), "after .cpu(): %d bytes, shared buffers %d, new %s" % (
        left,
        shared,
        new,
    )
    mod.to(DEV)
    assert allocated() - base in (want, want + residue) and torch.equal(mod(x).cpu(), y)
    # reloaded in place from the checkpoint's tensors
    mod.load_state_dict({key: torch.from_numpy(v) for key, v in stored.items()})
    assert allocated() - base in (want, want + residue) and torch.equal(mod(x).cpu(), y)
    base += allocated() - base - want  # the residue, if it stayed
    # another module of the same weight: only its own plan buffers
    other = mod.shared()
    assert other.trellis is mod.trellis and torch.equal(other(x).cpu(), y)
    assert allocated() - base == want + sum(
        block(v) for v in other.buffers.sizes(DEV).values() if v
    )
    del other
    # a weight made from the caller's CUDA tensors: one lane-layout copy,
    # the caller's tensor left as it was
    given = {key: torch.from_numpy(v).to(DEV) for key, v in stored.items() if key != "mcg"}
    before = allocated()
    made = EXL3Linear.from_tensors(codebook="mcg", max_m=16, **given)
    assert allocated() - before == block(payload) + sum(
        block(v) for v in made.buffers.sizes(DEV).values() if v
    )
    assert np.array_equal(given["trellis"].cpu().numpy(), stored["trellis"])
    assert made.trellis.data_ptr() != given["trellis"].data_ptr()
    assert torch.equal(made(x).cpu(), y)
    sd = made.state_dict()
    assert np.array_equal(sd["trellis"].cpu().numpy(), stored["trellis"])


def test_state_dict_of_an_uploaded_weight_is_the_checkpoints():
    """A module of a DeviceWeight.upload (its tensors repacked in place)
    gives the checkpoint layout too, and a module loaded from it runs the
    same."""
    name, path = layer_of(GENERIC[0])
    with libtrellis.Model(path) as m:
        weight = DeviceWeight.upload(m.layer(name))
    mod = EXL3Linear(weight, max_m=16)
    stored = checkpoint_tensors(path, name, ("trellis",))
    assert np.array_equal(mod.state_dict()["trellis"].cpu().numpy(), stored["trellis"])
    fresh = EXL3Linear(path, name, max_m=16)
    fresh.load_state_dict(mod.state_dict(), strict=False)  # it has no codebook marker
    x = random_x((3,), mod.in_features, torch.float16, seed=121)
    assert torch.equal(fresh(x), mod(x))
