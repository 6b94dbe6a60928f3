# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of an eager EXL3Linear against nn.Linear of the same shape.

    python python/bench_eager.py [--device cuda|cpu] [--m 1] [--calls 2000]

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
"""

import argparse
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--m", type=int, default=1, help="rows per call (default 1)")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)

    import torch

    import libtrellis

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
    path = os.path.join(VECTORS, CASE + ".safetensors")
    with libtrellis.Model(path) as model:
        exl3 = libtrellis.EXL3Linear(
            model, model.layer_names()[0], device=dev, max_m=max(args.m, 1)
        )
    k, n = exl3.in_features, exl3.out_features
    dense = torch.nn.Linear(k, n, bias=False).to(dev, torch.float16)
    x = torch.randn(args.m, k, device=dev).to(torch.float16)
    op = torch.ops.libtrellis.exl3_linear
    plan_id, out_dtype = exl3._plan_id, exl3.out_dtype

    rows = []
    with torch.inference_mode():
        for label, fn in (
            ("nn.Linear", lambda: dense(x)),
            ("EXL3Linear", lambda: exl3(x)),
            ("exl3_linear op", lambda: op(x, plan_id, n, out_dtype)),
        ):
            loop = timed(fn, args.calls, args.repeats, sync)

            def fn_synced(fn=fn):
                fn()
                sync()

            synced = timed(fn_synced, max(args.calls // 4, 50), args.repeats, sync)
            rows.append((label, loop, synced))
        if dev.type == "cuda":
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

    print(
        "%s, %dx%d K6/MCG, M = %d, fp16, torch %s, libtrellis %s"
        % (name, k, n, args.m, torch.__version__, libtrellis.__version__)
    )
    print("%-18s %12s %12s" % ("", "loop us/call", "synced us"))
    for label, loop, synced in rows:
        print("%-18s %12.1f %12.1f" % (label, loop * 1e6, synced * 1e6))
    gap = (rows[1][1] - rows[0][1]) * 1e6
    print(
        "eager EXL3Linear - nn.Linear: %+.1f us per call (target: within 10 us)%s"
        % (gap, "" if dev.type == "cuda" else "; on the CPU the forward itself dominates")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
