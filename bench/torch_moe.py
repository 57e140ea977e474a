#!/usr/bin/python3
"""10_ep's mixture of experts in PyTorch, one process: the bench's side by side, and a reader of
10_ep's --save and --dump-data files.

The model of common/train/moe.c and reference_moe.c: L residual blocks,
x <- x + sum over the token's kept choices of gate * relu(x W1_e) W2_e, no biases. The router
W_r [D, E]: probs = softmax(x W_r) over the E experts, the k most probable chosen, their gates
renormalised to sum to 1. Capacity C = ceil(cf k R / E) per expert of a group of R = B / groups
tokens (the run's ranks; 1 at NP=1), first come first served in token order (token t's choice j
is number t k + j); a choice over capacity adds nothing, its token keeps the residual path. Loss:
mean((x_L - y)^2) plus, per layer, aux_coef E sum_e f_e P_e (f_e: the share of all B k choices,
kept or not, that went to e, a constant; P_e: the mean of probs[:, e]). AdamW as ours (torch's
own: betas 0.9/0.999, eps 1e-8, decoupled weight decay) or SGD.

The initial weights are ours bit for bit (--seed): common/comm/rng_core.h's counter-based hash,
uniform(-1/sqrt(rows), 1/sqrt(rows)) keyed by (seed, tensor, element), redone in numpy. With
--data FILE (10_ep --dump-data FILE: every step's global batch x, y) the batches are ours too, so
the run is ours step for step, the same tokens routed and dropped (a near tie aside): the same
work, and losses to compare. Without --data each step makes its batch as torch_step.py does.

One thread (torch.set_num_threads(1), OMP/OpenBLAS 1): our ranks are single-threaded. One
untimed forward and backward first (no optimizer step, so the run stays ours), then --steps
timed steps. Prints "torch: mode=single np=1 ms_per_step=T loss=L ..." (the last step's loss)
and, with --losses, every step's.

  --load FILE --forward-only --data-step S   the loss of FILE's weights (10_ep --save) on
        --data's batch S (from 0), forward only: the check that a saved model loads.

Usage: /usr/bin/python3 bench/torch_moe.py --layers 4 --dim 64 --hidden 256 --batch 32 \\
         --steps 40 [--data d.safetensors] [--load m.safetensors --forward-only]
"""
import argparse
import json
import math
import os
import struct
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):  # splitmix64's finalizer, as dt_mix64 (numpy uint64 wraps)
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def initial(seed, t, rows, cols):
    """dt_initial_weights for tensor t: -bound + 2 bound u, in float32 as C computes it."""
    with np.errstate(over="ignore"):
        base = mix64(mix64(np.array([seed], dtype=np.uint64)) + np.uint64(t))
        z = mix64(base + np.arange(rows * cols, dtype=np.uint64))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    bound = np.float32(1.0) / np.sqrt(np.float32(rows))
    return torch.from_numpy((-bound + (np.float32(2) * bound) * u).reshape(rows, cols))


def read_safetensors(path):
    """{name: float32 tensor} of a safetensors file (F32 only, what ours writes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            sys.exit(f"torch_moe.py: {path}: {name} is {t['dtype']}, not F32")
        a, b = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).copy()).reshape(
            t["shape"])
    return out, head.get("__metadata__", {})


class MoE(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        L, D, H, E = a.layers, a.dim, a.hidden, a.experts
        per = 1 + 2 * E  # tensors per layer, in ours' order: router, then W1, W2 of each expert
        self.router = torch.nn.ParameterList(
            torch.nn.Parameter(initial(a.seed, l * per, D, E)) for l in range(L))
        self.w1 = torch.nn.ParameterList(
            torch.nn.Parameter(initial(a.seed, l * per + 1 + 2 * e, D, H))
            for l in range(L) for e in range(E))
        self.w2 = torch.nn.ParameterList(
            torch.nn.Parameter(initial(a.seed, l * per + 2 + 2 * e, H, D))
            for l in range(L) for e in range(E))
        self.a = a

    def load(self, tensors):
        with torch.no_grad():
            for l in range(self.a.layers):
                self.router[l].copy_(tensors[f"layers.{l}.router"])
                for e in range(self.a.experts):
                    self.w1[l * self.a.experts + e].copy_(tensors[f"layers.{l}.experts.{e}.w1"])
                    self.w2[l * self.a.experts + e].copy_(tensors[f"layers.{l}.experts.{e}.w2"])

    def forward(self, x):
        a = self.a
        B, E, k, G = x.shape[0], a.experts, a.topk, a.groups
        R = B // G
        C = math.ceil(a.capacity_factor * k * R / E)
        aux = x.new_zeros(())
        dropped = 0
        for l in range(a.layers):
            probs = torch.softmax(x @ self.router[l], dim=1)
            top, choice = torch.topk(probs, k, dim=1)  # [B, k], best first
            gate = top / top.sum(dim=1, keepdim=True)
            flat = choice.reshape(G, R * k)  # choice number t k + j, per group
            onehot = torch.nn.functional.one_hot(flat, E)
            slot = (onehot.cumsum(dim=1) * onehot).sum(dim=2) - 1  # its place in its expert's queue
            kept = (slot < C).reshape(B * k)
            dropped += int((~kept).sum())
            f = onehot.reshape(B * k, E).sum(dim=0).to(x.dtype) / (B * k)
            aux = aux + a.aux_coef * E * (f * probs.mean(dim=0)).sum()
            out = x.clone()
            expert = choice.reshape(B * k)
            g = gate.reshape(B * k)
            for e in range(E):
                idx = torch.nonzero(kept & (expert == e)).squeeze(1)  # in token order
                if idx.numel() == 0:
                    continue
                tok = idx // k
                h = torch.relu(x[tok] @ self.w1[l * E + e]) @ self.w2[l * E + e]
                out = out.index_add(0, tok, g[idx].unsqueeze(1) * h)
            x = out
        return x, aux, dropped


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["single"], default="single")  # bench/step.sh's interface
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=0, help="0: 4 dim")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--capacity-factor", type=float, default=1.25)
    p.add_argument("--aux-coef", type=float, default=0.01)
    p.add_argument("--groups", type=int, default=1, help="capacity groups (our run's NP)")
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=0, help="0: 0.0005 for adamw (10_ep's), 0.2 for sgd")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", help="10_ep --dump-data file: every step's batch")
    p.add_argument("--load", help="10_ep --save file: start from its weights")
    p.add_argument("--forward-only", action="store_true")
    p.add_argument("--data-step", type=int, default=0, help="--forward-only: the batch of this step")
    p.add_argument("--losses", action="store_true", help="print every step's loss")
    a = p.parse_args()
    a.hidden = a.hidden or 4 * a.dim
    a.lr = a.lr or (0.0005 if a.optimizer == "adamw" else 0.2)
    if a.np != 1 or a.batch % a.groups or not 1 <= a.topk <= a.experts:
        sys.exit("torch_moe.py: one process (--np 1); --groups must divide --batch; 1 <= --topk "
                 "<= --experts")
    torch.set_num_threads(1)
    model = MoE(a)
    if a.load:
        tensors, meta = read_safetensors(a.load)
        model.load(tensors)
    if a.data:
        d, meta = read_safetensors(a.data)
        X, Y = d["x"], d["y"]
        if a.groups > 1:  # the file holds a step's rows in one process's order, and rank r of
            # G walks rows r, r + G, r + 2G, ... of it (a strided shard, as DistributedSampler):
            # the capacity groups are those shares, one after another, as the run's ranks
            order = torch.arange(a.batch).reshape(a.batch // a.groups, a.groups).t().reshape(-1)
            X, Y = X[:, order], Y[:, order]
        if tuple(X.shape[1:]) != (a.batch, a.dim) or X.shape[0] < (a.data_step + 1 if a.forward_only else a.steps):
            sys.exit(f"torch_moe.py: {a.data} holds x {list(X.shape)}: want [>= steps, "
                     f"{a.batch}, {a.dim}]")
    if a.forward_only:
        if not (a.load and a.data):
            sys.exit("torch_moe.py: --forward-only needs --load and --data")
        with torch.no_grad():
            out, aux, dropped = model(X[a.data_step])
            mse = torch.mean((out - Y[a.data_step]) ** 2)
        print(f"torch: forward on {a.data}'s step {a.data_step} batch (index from 0) with {a.load}: loss {float(mse + aux):.6f}"
              f" (mse {float(mse):.6f} + load-balancing {float(aux):.6f}), {dropped} of "
              f"{a.batch * a.topk} choices dropped")
        return
    if not a.data:  # as torch_step.py: x uniform in [-1, 1), y from a fixed teacher block
        gen = torch.Generator().manual_seed(2)
        t1 = torch.empty(a.dim, a.dim).uniform_(-a.dim**-0.5, a.dim**-0.5, generator=gen)
        t2 = torch.empty(a.dim, a.dim).uniform_(-a.dim**-0.5, a.dim**-0.5, generator=gen)

    def batch(s):
        if a.data:
            return X[s], Y[s]
        x = torch.rand(a.batch, a.dim, generator=gen) * 2 - 1
        return x, torch.addmm(x, torch.relu(x @ t1), t2)

    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)

    def loss_of(s):
        x, y = batch(s)
        out, aux, dropped = model(x)
        return torch.mean((out - y) ** 2) + aux, dropped

    loss, _ = loss_of(0)  # warm-up: forward and backward, no step
    loss.backward()
    opt.zero_grad(set_to_none=True)
    losses, drops = [], 0
    t0 = time.perf_counter()
    for s in range(a.steps):
        loss, dropped = loss_of(s)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        drops += dropped
    per_step = (time.perf_counter() - t0) / a.steps
    if a.losses:
        for s, v in enumerate(losses):
            print(f"torch: step {s + 1} loss {float(v):.6f}")
    print(f"torch: mode=single np=1 ms_per_step={per_step * 1e3:.3f} loss={float(losses[-1]):.6f} "
          f"dropped={drops} of {a.steps * a.layers * a.batch * a.topk} choices "
          f"torch={torch.__version__} threads={torch.get_num_threads()}", flush=True)


if __name__ == "__main__":
    main()
