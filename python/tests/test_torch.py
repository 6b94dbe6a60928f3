# SPDX-License-Identifier: Apache-2.0
"""The PyTorch level where PyTorch is importable, with or without a GPU: the
operator, and EXL3Linear on the CPU (the library's reference forward)."""

import ctypes
import io
import os
import sys

import numpy as np
import pytest

import libtrellis
from libtrellis import TrellisError

from conftest import CASES, TOY_MODEL, case_path, ref_path

torch = pytest.importorskip("torch")

from libtrellis import EXL3Linear, SharedBuffers, _lib, _torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_eager  # noqa: E402

CPU = torch.device("cpu")
BY_NAME = {c["name"]: c for c in CASES}
UP = "model.layers.0.mlp.up_proj"


def random_x(shape, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, k, generator=g).to(dtype)


def reference(path, name, x, out_dtype=np.float32):
    """The NumPy level's CPU forward of x (fp16 or fp32)."""
    with libtrellis.Model(path) as m:
        return m.layer(name).forward(x.numpy().reshape(-1, x.shape[-1]), out_dtype=out_dtype)


def test_the_operator_is_registered():
    schema = str(torch.ops.libtrellis.exl3_linear.default._schema)
    assert schema.startswith("libtrellis::exl3_linear(Tensor x, ")
    assert schema.endswith(") -> Tensor")
    assert libtrellis.exl3_linear is not None


def test_an_unknown_plan_is_a_clear_error():
    x = torch.zeros(2, 256, dtype=torch.float16)
    with pytest.raises(TrellisError, match="closed or was never made") as e:
        torch.ops.libtrellis.exl3_linear(x, 123456789, 128, torch.float16)
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"


def test_no_cuda_is_a_clear_error():
    if torch.cuda.is_available() and libtrellis.cuda_built():
        pytest.skip("CUDA is usable here")
    with pytest.raises(TrellisError) as e:
        EXL3Linear(TOY_MODEL, UP, device="cuda")
    assert e.value.status == "TRELLIS_ERR_NO_DEVICE"
    assert "CUDA" in str(e.value)
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    with pytest.raises(RuntimeError):  # torch's own error where it has no CUDA
        mod.to("cuda")


@pytest.mark.parametrize("case_name", [c["name"] for c in CASES[::3]])
def test_cpu_module_is_the_reference_forward(case_name):
    case = BY_NAME[case_name]
    ref = libtrellis.read_safetensors(ref_path(case))
    x = torch.from_numpy(ref["x"])
    mod = EXL3Linear(
        case_path(case),
        case["layer"],
        device="cpu",
        max_m=case["m"],
        dtype=x.dtype,
        out_dtype=torch.float32,
    )
    assert mod.device == CPU and mod.path(1) == "cpu"
    y = mod(x)
    assert torch.equal(y, torch.from_numpy(reference(case_path(case), case["layer"], x)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_cpu_dtypes_and_shapes(dtype):
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu", dtype=dtype, out_dtype=torch.float32)
    x = random_x((2, 3), mod.in_features, dtype, seed=1)
    y = mod(x)
    assert y.shape == (2, 3, mod.out_features) and y.dtype == torch.float32
    want = reference(TOY_MODEL, UP, x.float())
    if dtype == torch.bfloat16:  # the library reads bf16 x exactly; NumPy has no bf16
        assert torch.equal(y.reshape(6, -1), torch.from_numpy(want))
    else:
        assert torch.equal(y.reshape(6, -1), torch.from_numpy(reference(TOY_MODEL, UP, x)))
    assert mod(x[0, 0]).shape == (mod.out_features,)
    assert mod(x[:0]).shape == (0, 3, mod.out_features)
    half = EXL3Linear(TOY_MODEL, UP, device="cpu", dtype=dtype)
    assert half(x).dtype == dtype


def bad_inputs(k):
    """x a module of in_features k and max_m 4 refuses: (x, status, text
    the message holds)."""
    return [
        (torch.zeros(2, k), "TRELLIS_ERR_DTYPE", "float32"),
        (torch.zeros(2, k + 16, dtype=torch.float16), "TRELLIS_ERR_SHAPE", str(k)),
        (torch.zeros(5, k, dtype=torch.float16), "TRELLIS_ERR_SHAPE", "max_m = 4"),
        (
            torch.zeros(2, 2 * k, dtype=torch.float16)[:, ::2],
            "TRELLIS_ERR_INVALID_ARGUMENT",
            "contiguous",
        ),
        (torch.zeros((), dtype=torch.float16), "TRELLIS_ERR_SHAPE", "expected"),
    ]


def test_cpu_bad_input():
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=4)
    k = mod.in_features
    good = random_x((3,), k, torch.float16, seed=2)
    want = mod(good)
    for x, status, text in bad_inputs(k):
        with pytest.raises(TrellisError) as e:
            mod(x)
        assert e.value.status == status, (str(e.value), status)
        assert text in str(e.value) and mod.layer_name in str(e.value)
        assert isinstance(e.value, ValueError if status != "TRELLIS_ERR_DTYPE" else TypeError)
    with pytest.raises(TrellisError, match="not a tensor"):
        mod(good.numpy())
    assert torch.equal(mod(good), want)
    # more rows than max_m run in pieces where the module is made so
    split = EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=4, split_rows=True)
    x = random_x((11,), k, torch.float16, seed=3)
    assert torch.equal(split(x), EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=16)(x))


def test_state_dict_round_trips_the_checkpoint_tensors():
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    sd = mod.state_dict()
    assert set(sd) == {"trellis", "suh", "svh", "mcg"}
    with libtrellis.Model(TOY_MODEL) as m:
        for key, t in sd.items():
            want = m.tensor(UP + "." + key)
            assert t.dtype == torch.from_numpy(want).dtype and tuple(t.shape) == want.shape
            assert np.array_equal(t.numpy(), want), key
    # into a module of another layer of the same shape: it becomes this one
    other = EXL3Linear(TOY_MODEL, "model.layers.1.mlp.up_proj", device="cpu")
    x = random_x((3,), mod.in_features, torch.float16, seed=4)
    assert not torch.equal(other(x), mod(x))
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    other.load_state_dict(torch.load(buf))
    assert torch.equal(other(x), mod(x))
    # a wrong shape is refused as load_state_dict refuses any
    with pytest.raises(RuntimeError, match="size mismatch"):
        other.load_state_dict(EXL3Linear(TOY_MODEL, "model.layers.0.mlp.down_proj").state_dict())


def test_to_dtype_changes_the_activations_only():
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    x = random_x((2,), mod.in_features, torch.float32, seed=5)
    y16 = mod(x.half())
    mod.float()
    assert mod.dtype == torch.float32 and mod.out_dtype == torch.float32
    assert mod.suh.dtype == torch.float16 and mod.trellis.dtype == torch.int16
    y32 = mod(x)
    assert y32.dtype == torch.float32
    assert torch.allclose(y32.half().float(), y16.float(), rtol=1e-2, atol=1e-2)
    mod.to(torch.bfloat16)
    assert mod(x.bfloat16()).dtype == torch.bfloat16


def test_a_module_inside_a_model_moves_with_it():
    model = torch.nn.Sequential(torch.nn.Linear(8, 256), EXL3Linear(TOY_MODEL, UP, device="cpu"))
    model.to(torch.float16)
    x = torch.randn(3, 8).half()
    y = model(x)
    assert y.shape == (3, 512) and y.dtype == torch.float16
    names = [n for n, _ in model.named_buffers()]
    assert names == ["1.trellis", "1.suh", "1.svh", "1.mcg"]


def test_from_model_shares_buffers_and_keeps_model_order():
    mods = EXL3Linear.from_model(TOY_MODEL, device="cpu", max_m=4)
    assert len(mods) == 14
    names = list(mods)
    assert names[0].startswith("model.layers.0.") and names[-1].startswith("model.layers.1.")
    assert len({id(m.buffers) for m in mods.values()}) == 1
    assert isinstance(mods[names[0]].buffers, SharedBuffers)
    for name, mod in mods.items():
        x = random_x((2,), mod.in_features, torch.float16, seed=7)
        assert torch.equal(mod(x), torch.from_numpy(reference(TOY_MODEL, name, x, np.float16)))


def test_shared_module_uses_the_same_memory():
    a = EXL3Linear(TOY_MODEL, UP, device="cpu")
    b = a.shared()
    assert b.trellis.data_ptr() == a.trellis.data_ptr()
    x = random_x((2,), a.in_features, torch.float16, seed=8)
    assert torch.equal(a(x), b(x))
    a.close()
    with pytest.raises(TrellisError, match="closed"):
        a(x)
    assert torch.equal(b(x), b(x))


def test_from_tensors_on_the_cpu():
    case = BY_NAME["k6_mcg_512x256_m1_bias"]
    t = libtrellis.read_safetensors(case_path(case))
    p = case["layer"] + "."
    parts = {f: torch.from_numpy(t[p + f]) for f in ("trellis", "suh", "svh", "bias")}
    mod = EXL3Linear.from_tensors(codebook="mcg", device="cpu", **parts)
    ref = EXL3Linear(case_path(case), case["layer"], device="cpu")
    x = random_x((5,), case["k"], torch.float16, seed=9)
    assert torch.equal(mod(x), ref(x))
    assert set(mod.state_dict()) == {"trellis", "suh", "svh", "bias"}


def test_compile_and_opcheck_on_the_cpu():
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    x = random_x((3,), mod.in_features, torch.float16, seed=10)
    compiled = torch.compile(mod, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(x), mod(x))
    torch.library.opcheck(
        torch.ops.libtrellis.exl3_linear.default,
        (x, mod._plan_id, mod.out_features, torch.float16),
    )


def test_cpu_module_closed_while_other_threads_run_it():
    """A CPU module closed while four threads run it: the runs that started
    finish with the right result, later ones say the module is closed."""
    import threading

    mod = EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=64)
    x = torch.ones(64, mod.in_features, dtype=torch.float16)
    want = mod(x)
    errors, runs = [], [0]
    started = threading.Barrier(5)

    def work():
        started.wait()
        try:
            while True:
                y = mod(x)
                if not torch.equal(y, want):
                    errors.append("a run differs")
                runs[0] += 1
        except (TrellisError, ValueError) as exc:
            if "closed" not in str(exc):
                errors.append(exc)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    mod.close()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_module_integers_out_of_the_c_range(value):
    with pytest.raises(OverflowError, match="max_m: %d does not fit" % value):
        EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=value)
    with pytest.raises(OverflowError, match="threads"):
        EXL3Linear(TOY_MODEL, UP, device="cpu", threads=value)


# ------------------------------------------- the payload's lane layout --

# (H half-bits per weight, codebook): every integer K, the half rates on MUL1
RATES = [(2 * k, "mcg") for k in range(1, 9)] + [(h, "mul1") for h in (3, 5, 7)]
B12X = os.path.join(os.path.dirname(TOY_MODEL), "b12x")


def library_lanes(layer):
    """{field: the library's lane layout (trellis_weight_repack_host)} of a
    host layer's payload."""
    with layer.borrow() as w:
        host = _torch._host_tensors(w)
        out = {f: torch.empty_like(host[f]) for f in _torch._PAYLOADS if f in host}
        ptr = {f: out[f].data_ptr() if f in out else None for f in _torch._PAYLOADS}
        _torch.call(
            _lib.lib.trellis_weight_repack_host,
            ctypes.byref(w),
            ctypes.c_void_p(ptr["trellis"]),
            ctypes.c_void_p(ptr["trellis1"]) if ptr["trellis1"] else None,
        )
        return host, out, _torch._meta_copy(w)


@pytest.mark.parametrize("h,codebook", RATES, ids=["H%d" % h for h, _ in RATES])
def test_the_lane_layout_conversion_is_the_librarys_repack(h, codebook):
    """The torch conversion (what a CUDA module's state_dict and .cpu() use)
    against trellis_weight_repack_host, both ways, at every rate, in place
    and into a new tensor."""
    g = np.random.default_rng(h)
    payload = g.integers(-(2**15), 2**15, size=(16, 24, 8 * h), dtype=np.int16)
    layer = libtrellis.Layer.from_arrays(
        payload, suh=np.ones(256, np.float16), svh=np.ones(384, np.float16), codebook=codebook
    )
    host, want, meta = library_lanes(layer)
    assert _torch._record_rate(meta, "trellis") == h
    t = host["trellis"]
    lanes = _torch._convert_layout(t, h, True)
    assert torch.equal(lanes, want["trellis"]) and not torch.equal(lanes, t)
    assert torch.equal(_torch._convert_layout(lanes, h, False), t)
    same = lanes.clone()
    assert _torch._convert_layout(same, h, False, same) is same and torch.equal(same, t)
    # several passes of a conversion hold the same
    old = _torch._LANE_PASS_BYTES
    try:
        _torch._LANE_PASS_BYTES = 3 * 128 * h
        assert torch.equal(_torch._convert_layout(t, h, True), want["trellis"])
    finally:
        _torch._LANE_PASS_BYTES = old


@pytest.mark.skipif(not os.path.isdir(B12X), reason="no b12x vectors in this tree")
@pytest.mark.parametrize("name", ["p24_k_mcg_256x128", "p24_n_sqg_e4m3_128x256"])
def test_the_lane_layout_of_a_pairs_two_records(name):
    with libtrellis.Model(os.path.join(B12X, name + ".safetensors")) as m:
        host, want, meta = library_lanes(m.layer(m.layer_names()[0]))
        assert set(want) == {"trellis", "trellis1"}
        for field, t in host.items():
            if field in want:
                h = _torch._record_rate(meta, field)
                assert torch.equal(_torch._convert_layout(t, h, True), want[field]), field
                assert torch.equal(_torch._convert_layout(want[field], h, False), t), field


def payload_storages(mod):
    """{storage address: bytes} of every payload tensor the module and its
    weight hold (the module's buffers, the weight's tensors and what it was
    made from, while alive)."""
    dw = mod.device_weight
    held = [mod._buffers.get(f) for f in _torch._PAYLOADS]
    held += [dw._tensors.get(f) for f in _torch._PAYLOADS]
    held += [dw._sources[f]() for f in _torch._PAYLOADS if f in dw._sources]
    return {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in held if t is not None
    }


def test_a_module_holds_its_payload_once():
    with libtrellis.Model(TOY_MODEL) as m:
        layer = m.layer(UP)
        payload = layer.k * layer.n * layer.bits // 8
        mods = [
            EXL3Linear(TOY_MODEL, UP, device="cpu"),
            EXL3Linear(layer, device="cpu"),
            EXL3Linear(libtrellis.DeviceWeight.upload(layer, "cpu")),
        ]
    mods.append(mods[0].shared())
    for mod in mods:
        assert list(payload_storages(mod).values()) == [payload]
        assert mod.trellis is mod.device_weight._tensors["trellis"]
    assert mods[3].trellis is mods[0].trellis
    # moved, reloaded: still one
    mod = mods[0]
    mod.to("cpu", torch.float32)
    mod.load_state_dict(EXL3Linear(TOY_MODEL, UP, device="cpu").state_dict())
    assert list(payload_storages(mod).values()) == [payload]


def to_lanes_in_place(mod):
    """What a CUDA module holds: its payload buffers in the lane layout
    (here on the CPU, to run the conversions of state_dict, load_state_dict
    and .to() without a GPU)."""
    mod._invalidate()
    for field in _torch._PAYLOADS:
        t = mod._buffers.get(field)
        if t is not None:
            _torch._convert_layout(t, mod._payload_rate(field), True, t)
    mod.__dict__["_layout"] = _lib.LAYOUT_LANES


def test_a_lane_layout_payload_gives_and_takes_the_checkpoint_layout():
    with libtrellis.Model(TOY_MODEL) as m:
        stored = {key: m.tensor(UP + "." + key) for key in ("trellis", "suh", "svh", "mcg")}
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    x = random_x((3,), mod.in_features, torch.float16, seed=11)
    want = mod(x)
    to_lanes_in_place(mod)
    lanes = mod.trellis.clone()
    assert not np.array_equal(lanes.numpy(), stored["trellis"])
    # state_dict: the checkpoint's tensors, the buffer left as it is
    sd = mod.state_dict()
    for key, t in sd.items():
        assert np.array_equal(t.numpy(), stored[key]), key
    assert torch.equal(mod.trellis, lanes) and sd["trellis"] is not mod.trellis
    # another module takes it
    other = EXL3Linear(TOY_MODEL, "model.layers.1.mlp.up_proj", device="cpu")
    other.load_state_dict(sd)
    assert torch.equal(other(x), want)
    # load_state_dict into the lane-layout module: in place, then planned
    before = mod.trellis
    mod.load_state_dict(sd)
    assert mod.trellis is before and np.array_equal(mod.trellis.numpy(), stored["trellis"])
    assert torch.equal(mod(x), want)
    # strict=False without the payload: the payload it held stays
    to_lanes_in_place(mod)
    mod.load_state_dict({k: v for k, v in sd.items() if k != "trellis"}, strict=False)
    assert np.array_equal(mod.trellis.numpy(), stored["trellis"])
    assert torch.equal(mod(x), want)
    # .to("cpu") of a lane-layout payload (a CUDA module moved to the host)
    to_lanes_in_place(mod)
    mod.to("cpu")
    assert np.array_equal(mod.trellis.numpy(), stored["trellis"])
    assert torch.equal(mod(x), want)
    assert list(payload_storages(mod).values()) == [mod.trellis.nbytes]


def test_a_lane_layout_weight_comes_to_the_cpu_in_place_or_copied():
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu")
    ckpt = mod.trellis.clone()
    to_lanes_in_place(mod)
    lanes = mod.trellis.clone()
    given = {"trellis": mod.trellis, "suh": mod.suh, "svh": mod.svh}
    copied = _torch.DeviceWeight(mod._meta, given, CPU, UP, layout=_lib.LAYOUT_LANES)
    assert copied.layout == _lib.LAYOUT_CHECKPOINT
    assert torch.equal(copied._tensors["trellis"], ckpt) and torch.equal(mod.trellis, lanes)
    assert copied._struct.layout == _lib.LAYOUT_CHECKPOINT
    owned = _torch.DeviceWeight(mod._meta, given, CPU, UP, owned=True, layout=_lib.LAYOUT_LANES)
    assert owned._tensors["trellis"] is mod.trellis and torch.equal(mod.trellis, ckpt)


# --------------------------------------------------- the eager path --


@pytest.fixture
def stand_in(monkeypatch):
    """A CPU module pointed at a CUDA plan's eager path on CPU tensors
    (bench_eager's stand-in: the library's run stubbed, so it only checks,
    allocates and calls)."""
    monkeypatch.setattr(_torch, "_trellis_run", bench_eager.stub_run(_torch))
    monkeypatch.setattr(_torch, "_raw_stream", abs)
    mod = EXL3Linear(TOY_MODEL, UP, device="cpu", max_m=4)
    plan = bench_eager.cpu_stand_in(torch, _torch, mod, 4)
    return mod, plan


def test_the_eager_path_checks_what_it_runs(stand_in):
    mod, plan = stand_in
    k, n = mod.in_features, mod.out_features
    y = mod(torch.zeros(2, 3, k, dtype=torch.float16)[0])
    assert y.shape == (3, n) and y.dtype == torch.float16
    assert mod(torch.zeros(k, dtype=torch.float16)).shape == (n,)
    assert mod(torch.zeros(0, k, dtype=torch.float16)).shape == (0, n)
    for x, status, text in bad_inputs(k):
        with pytest.raises(TrellisError) as e:
            mod(x)
        assert e.value.status == status and text in str(e.value), str(e.value)
    # a plan on another device refuses x (a CUDA plan a CPU tensor)
    other = _torch._eager_plan_call(plan)
    plan.device, plan.index = torch.device("cuda", 0), 0
    with pytest.raises(TrellisError, match="x is on cpu, the layer on cuda:0") as e:
        _torch._eager_plan_call(plan)(torch.zeros(1, k, dtype=torch.float16))
    assert e.value.status == "TRELLIS_ERR_INVALID_ARGUMENT"
    plan.device, plan.index = CPU, -1
    assert other(torch.zeros(1, k, dtype=torch.float16)).shape == (1, n)
    # closed: the module, the plan and a kept eager function all say so
    keep = mod._eager
    plan.close()
    with pytest.raises(TrellisError, match="closed"):
        keep(torch.zeros(1, k, dtype=torch.float16))
    with pytest.raises(TrellisError, match="closed"):
        plan(torch.zeros(1, k, dtype=torch.float16))


def test_bench_eager_runs_stubbed_on_the_cpu(capsys):
    real = _torch._trellis_run, _torch._raw_stream
    assert bench_eager.main(["--device", "cpu", "--stub", "--calls", "50", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "trellis_run stubbed" in out and "alloc-only module" in out
    assert (_torch._trellis_run, _torch._raw_stream) == real  # put back
