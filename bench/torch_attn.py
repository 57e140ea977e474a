#!/usr/bin/python3
"""Causal attention in PyTorch the explicit way, for lesson 11's bench: for B
sequences of S tokens, A heads of dimension dh, scores = q k^T / sqrt(dh),
masked above the diagonal, softmax, times v; then backward from a random
gradient of the output. The S x S scores are materialised, as in our
one-process reference (common/train/reference_attn.c); our lesson at NP=1
computes the same function one query row at a time, scores never stored.

One thread (OMP_NUM_THREADS=1 before torch loads, torch.set_num_threads(1)), as
our lesson's one process. One untimed warm-up, then --repeat timed forward +
backward passes; prints, per S,
  torch-attn: S=... ms=... (the fastest of the repeats, forward + backward)
or "torch-attn: S=... skipped: ..." when the scores would not fit --max-gib.

Usage: /usr/bin/python3 bench/torch_attn.py --seqs 1024 2048 --batch 1 --heads 4 --dh 8
"""
import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402


def attention(q, k, v):
    s = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", type=int, nargs="+", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dh", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--max-gib", type=float, default=8.0)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    for s in a.seqs:
        # scores, probabilities and their gradients: about 4 S x S tensors per head
        need = 4 * a.batch * a.heads * s * s * 4 / 2**30
        if need > a.max_gib:
            print(f"torch-attn: S={s} skipped: about {need:.1f} GiB of S x S tensors > --max-gib {a.max_gib}")
            continue
        shape = (a.batch, a.heads, s, a.dh)
        q, k, v = (torch.rand(shape, requires_grad=True) for _ in range(3))
        g = torch.rand(shape)
        best = float("inf")
        for r in range(a.repeat + 1):
            t0 = time.perf_counter()
            attention(q, k, v).backward(g)
            t = time.perf_counter() - t0
            if r > 0:  # the first is the warm-up
                best = min(best, t)
            for x in (q, k, v):
                x.grad = None
        print(f"torch-attn: S={s} ms={best * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main()
