# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of an eager EXL3Linear against nn.Linear of the same shape.

    python python/bench_eager.py [--device cuda|cpu] [--m 1] [--calls 2000] [--stub]

A 1024x512 K6/MCG layer of the test vectors (k6_mcg_1024x512_m17) at M = 1
rows, fp16, against an fp16 nn.Linear(1024, 512). Each figure is the median
over --repeats runs of --calls back-to-back calls, divided by the calls:

- loop: calls issued without waiting (on a GPU whose kernels are short this
  is the host's cost per call: Python, the custom operator or ctypes, the
  launch);
- synced: each call followed by a synchronize (the latency a caller sees);
- and for EXL3Linear, the same calls through torch.ops.libtrellis
  .exl3_linear (what torch.compile calls) and, on CUDA, a CUDA-graph
  replay of one call.

The last line says how far the eager EXL3Linear's loop cost is from
nn.Linear's (the target: within 10 us).

--stub times the Python side alone: the library's trellis_run is replaced
by a C function that returns at once (trellis_clear_error's, called with
trellis_run's arguments), so the figures are the wrapper's cost on this
host: the module call, the checks, the output's allocation, the ctypes call.
With --device cpu (any machine, no GPU needed) the CUDA path's eager call
runs on CPU tensors: a plan stand-in on the CPU, the same code as a CUDA
plan's, its output allocated on the CPU and the stream lookup a builtin of
like cost (abs). Beside it, a module whose forward only allocates its output
(torch.empty), the floor of any module that returns a new tensor, and an
nn.Linear(16, 16), whose cost is mostly its own dispatch.
"""

import argparse
import ctypes
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "tests", "data", "testvectors")
CASE = "k6_mcg_1024x512_m17"


def timed(fn, calls, repeats, sync):
    """Median seconds per call over `repeats` runs of `calls` calls."""
    for _ in range(max(calls // 10, 10)):
        fn()
    sync()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t0) / calls)
    return statistics.median(runs)


def stub_run(_torch):
    """A ctypes function with trellis_run's arguments whose C body returns
    at once (trellis_clear_error's; it returns nothing, None: success)."""
    addr = ctypes.cast(_torch.lib.trellis_clear_error, ctypes.c_void_p).value
    return ctypes.CFUNCTYPE(None, *_torch._trellis_run.argtypes)(addr)


class StandInHandle:
    """A plan handle that is never dereferenced (the run is stubbed)."""

    ptr = 1


def cpu_stand_in(torch, _torch, exl3, max_m):
    """Points a CPU EXL3Linear at a stand-in of a CUDA plan: a Plan whose
    device is the CPU (index -1) and whose handle is never dereferenced
    (the run is stubbed), with the eager path a CUDA plan gets."""
    plan = _torch.Plan.__new__(_torch.Plan)
    plan.weight = exl3.device_weight
    plan.device, plan.index = torch.device("cpu"), -1
    plan.max_m, plan.split_rows = max_m, False
    plan.dtype = plan.out_dtype = plan.compute_dtype = exl3.dtype
    plan.k, plan.n = exl3.in_features, exl3.out_features
    plan._buffers_struct = _torch._lib.Buffers()
    plan._box = [StandInHandle()]
    plan.id = next(_torch._plan_ids)
    _torch._plans[plan.id] = plan
    plan.eager = _torch._eager_plan_call(plan)
    exl3._invalidate()
    exl3.__dict__.update(_runner=plan, _eager=plan.eager, _stale=False)
    return plan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--m", type=int, default=1, help="rows per call (default 1)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument(
        "--stub", action="store_true", help="the library's run stubbed: the wrapper's cost alone"
    )
    args = ap.parse_args(argv)

    import torch

    import libtrellis
    from libtrellis import _torch

    if args.device == "cuda" and not (
        torch.cuda.is_available() and libtrellis.cuda_built() and libtrellis.cuda_device_count()
    ):
        print("bench_eager: no usable CUDA device (try --device cpu)", file=sys.stderr)
        return 1
    dev = torch.device(args.device)
    if dev.type == "cuda":
        dev = torch.device("cuda", torch.cuda.current_device())
        sync = torch.cuda.synchronize
        name = torch.cuda.get_device_name(dev)
    else:
        sync = lambda: None  # noqa: E731
        name = "cpu"
    real_run, real_stream = _torch._trellis_run, _torch._raw_stream
    if args.stub:
        _torch._trellis_run = stub_run(_torch)  # read by plans made from here on
        if dev.type == "cpu":  # no CUDA stream to look up: a builtin alike in cost
            _torch._raw_stream = abs
    try:
        path = os.path.join(VECTORS, CASE + ".safetensors")
        with libtrellis.Model(path) as model:
            exl3 = libtrellis.EXL3Linear(
                model, model.layer_names()[0], device=dev, max_m=max(args.m, 1)
            )
        stand_in = None
        if args.stub and dev.type == "cpu":
            stand_in = cpu_stand_in(torch, _torch, exl3, max(args.m, 1))
        k, n = exl3.in_features, exl3.out_features
        dense = torch.nn.Linear(k, n, bias=False).to(dev, torch.float16)
        x = torch.randn(args.m, k, device=dev).to(torch.float16)
        op = torch.ops.libtrellis.exl3_linear
        plan_id, out_dtype = exl3._plan_id, exl3.out_dtype

        class AllocOnly(torch.nn.Module):
            def forward(self, x):
                return torch.empty((x.shape[0], n), dtype=torch.float16, device=x.device)

        alloc_only = AllocOnly()
        tiny = torch.nn.Linear(16, 16, bias=False).to(dev, torch.float16)
        x16 = torch.randn(args.m, 16, device=dev).to(torch.float16)
        cases = [
            ("nn.Linear", lambda: dense(x)),
            ("EXL3Linear", lambda: exl3(x)),
            ("exl3_linear op", lambda: op(x, plan_id, n, out_dtype)),
        ]
        if args.stub:
            cases.append(("alloc-only module", lambda: alloc_only(x)))
            cases.append(("nn.Linear 16x16", lambda: tiny(x16)))
        rows = []
        with torch.inference_mode():
            for label, fn in cases:
                loop = timed(fn, args.calls, args.repeats, sync)

                def fn_synced(fn=fn):
                    fn()
                    sync()

                synced = timed(fn_synced, max(args.calls // 4, 50), args.repeats, sync)
                rows.append((label, loop, synced))
            if dev.type == "cuda" and not args.stub:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        exl3(x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    exl3(x)
                replay = timed(graph.replay, args.calls, args.repeats, sync)

                def replay_synced():
                    graph.replay()
                    sync()

                rows.append(
                    (
                        "EXL3Linear graph",
                        replay,
                        timed(replay_synced, args.calls // 4, args.repeats, sync),
                    )
                )
        if stand_in is not None:
            stand_in.close()
    finally:
        _torch._trellis_run, _torch._raw_stream = real_run, real_stream

    print(
        "%s, %dx%d K6/MCG, M = %d, fp16, torch %s, libtrellis %s%s"
        % (
            name,
            k,
            n,
            args.m,
            torch.__version__,
            libtrellis.__version__,
            (
                ", trellis_run stubbed"
                + (" (CUDA eager path on CPU tensors)" if dev.type == "cpu" else "")
                if args.stub
                else ""
            ),
        )
    )
    print("%-18s %12s %12s" % ("", "loop us/call", "synced us"))
    for label, loop, synced in rows:
        print("%-18s %12.2f %12.2f" % (label, loop * 1e6, synced * 1e6))
    if args.stub:
        floor = rows[3][1]
        print(
            "eager EXL3Linear - alloc-only module: %+.2f us per call (the wrapper's own cost "
            "above a module that returns a new tensor); nn.Linear %s"
            % (
                (rows[1][1] - floor) * 1e6,
                "computes (not stubbed)" if dev.type == "cpu" else "runs its kernel",
            )
        )
    else:
        gap = (rows[1][1] - rows[0][1]) * 1e6
        print(
            "eager EXL3Linear - nn.Linear: %+.1f us per call (target: within 10 us)%s"
            % (gap, "" if dev.type == "cuda" else "; on the CPU the forward itself dominates")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
