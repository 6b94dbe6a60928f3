#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Swap the nn.Linear modules of a small torch model for EXL3Linear and
capture the model's forward in one CUDA graph.

The model has the shape of the toy EXL3 checkpoint in
tests/data/testvectors/toy-exl3-model: two Llama-style decoder blocks,
hidden size 256, MLP size 512, its linears named as in the checkpoint
(model.layers.N.self_attn.q_proj, ...). It first runs with ordinary fp16
nn.Linear layers holding the checkpoint's dense weights, then with every
linear replaced by the EXL3Linear that EXL3Linear.from_model gives for its
name; the two outputs agree to fp16 accuracy. The EXL3 model's forward is
then captured into one torch.cuda.CUDAGraph, whose replays must match the
eager forward bit for bit.

    python python/examples/swap_linears.py [--model DIR] [--batch B] [--tokens T]

Needs a CUDA GPU, PyTorch with CUDA and libtrellis built with CUDA; on a
machine without them it says so and exits with status 1.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOY = os.path.join(HERE, "..", "..", "tests", "data", "testvectors", "toy-exl3-model")


def build_model(torch, hidden=256, mlp=512, kv=128, head_dim=64, layers=2):
    nn = torch.nn
    F = torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden))

        def forward(self, x):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            return (h * self.weight.float()).to(x.dtype)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(hidden, hidden, bias=False)
            self.k_proj = nn.Linear(hidden, kv, bias=False)
            self.v_proj = nn.Linear(hidden, kv, bias=False)
            self.o_proj = nn.Linear(hidden, hidden, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, -1, head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, -1, head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, -1, head_dim).transpose(1, 2)
            rep = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(o.transpose(1, 2).reshape(b, t, hidden).contiguous())

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(hidden, mlp, bias=False)
            self.up_proj = nn.Linear(hidden, mlp, bias=False)
            self.down_proj = nn.Linear(mlp, hidden, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.mlp = MLP()

        def forward(self, x):
            h = self.input_layernorm(x)
            x = x + self.self_attn(h)
            return x + self.mlp(self.input_layernorm(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Block() for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Decoder()

        def forward(self, x):
            return self.model(x)

    return Toy()


def load_dense(torch, libtrellis, net, path):
    """The checkpoint's weights in the plain model: each linear gets its
    layer's dense weight (W is [in, out]; nn.Linear keeps [out, in]), each
    norm its tensor."""
    with libtrellis.Model(path) as model:
        others = set(model.other_tensor_names())
        for name, mod in net.named_modules():
            if isinstance(mod, torch.nn.Linear):
                dense = model.layer(name).decode(dense=True)
                mod.weight.data.copy_(torch.from_numpy(dense).t())
            elif name + ".weight" in others:
                mod.weight.data.copy_(torch.from_numpy(model.tensor(name + ".weight")))


def swap_linears(torch, net, replacements):
    """Replaces every nn.Linear whose name has an EXL3 layer; returns the
    names replaced."""
    swapped = []
    for name, mod in list(net.named_modules()):
        if isinstance(mod, torch.nn.Linear) and name in replacements:
            parent, _, child = name.rpartition(".")
            setattr(net.get_submodule(parent), child, replacements[name])
            swapped.append(name)
    return swapped


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=TOY, help="EXL3 model directory")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--replays", type=int, default=100)
    args = parser.parse_args(argv)

    try:
        import torch
    except ImportError:
        print("swap_linears: needs PyTorch (with CUDA); it is not installed", file=sys.stderr)
        return 1
    import libtrellis

    if not torch.cuda.is_available():
        print("swap_linears: needs a CUDA GPU; PyTorch sees none", file=sys.stderr)
        return 1
    if not libtrellis.cuda_built() or libtrellis.cuda_device_count() == 0:
        print(
            "swap_linears: %s was built without CUDA or sees no GPU; install the "
            "package on a machine with the CUDA toolkit" % libtrellis.LIBRARY_PATH,
            file=sys.stderr,
        )
        return 1

    torch.manual_seed(0)
    dev = torch.device("cuda")
    net = build_model(torch)
    load_dense(torch, libtrellis, net, args.model)
    net = net.to(dev, torch.float16).eval()
    x = torch.randn(args.batch, args.tokens, 256, device=dev, dtype=torch.float16)

    with torch.inference_mode():
        y_dense = net(x)
        exl3 = libtrellis.EXL3Linear.from_model(
            args.model, max_m=args.batch * args.tokens, dtype=torch.float16
        )
        swapped = swap_linears(torch, net, exl3)
        left = [n for n, m in net.named_modules() if isinstance(m, torch.nn.Linear)]
        print("swapped %d nn.Linear for EXL3Linear (%d left)" % (len(swapped), len(left)))
        y = net(x)
        rel = ((y.float() - y_dense.float()).norm() / y_dense.float().norm()).item()
        print("EXL3 model vs the fp16 dense model: relative L2 %.2e" % rel)

        # Warm up on a side stream, then capture the whole forward.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                net(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y_graph = net(x)
        eager = net(x)
        mismatches = 0
        for _ in range(args.replays):
            y_graph.fill_(float("nan"))
            graph.replay()
            mismatches += not torch.equal(y_graph, eager)
        torch.cuda.synchronize()

        def timed(fn, reps=50):
            fn()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) * 1000.0 / reps

        t_eager = timed(lambda: net(x))
        t_graph = timed(graph.replay)

    print(
        "CUDA graph: %d replays, %d differ from the eager forward; "
        "eager %.1f us, graph replay %.1f us per forward"
        % (args.replays, mismatches, t_eager, t_graph)
    )
    ok = mismatches == 0 and rel < 1e-2 and not left
    print("swap_linears: %s" % ("OK" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
