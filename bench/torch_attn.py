#!/usr/bin/python3
"""Causal attention in PyTorch the explicit way, for lesson 11's bench: for B
sequences of S tokens, A heads of dimension dh, scores = q k^T / sqrt(dh),
masked above the diagonal, softmax, times v; then backward from a random
gradient of the output. The S x S scores are materialised, as in our
one-process reference (common/train/reference_attn.c); our lesson at NP=1
computes the same function in tiles, the scores never stored.

And the whole training step of lesson 11's transformer (--layers blocks of
u = x + Attn(x) Wo, x' = u + relu(u W1) W2, no biases, H = 4D; the MSE loss;
backward; torch.optim.AdamW at lr 0.003): what the lesson's step at NP=1 does.

One thread (OMP_NUM_THREADS=1 before torch loads, torch.set_num_threads(1)), as
our lesson's one process. One untimed warm-up, then --repeat timed passes;
prints, per S,
  torch-attn: S=... ms=... (the fastest of the repeats, forward + backward)
  torch-step: S=... ms=... (the fastest, forward, backward and the optimizer)
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


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
        self.wq, self.wk, self.wv, self.wo = lin(d, d), lin(d, d), lin(d, d), lin(d, d)
        self.w1, self.w2 = lin(d, 4 * d), lin(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        o = attention(split(self.wq(x)), split(self.wk(x)), split(self.wv(x)))
        u = x + self.wo(o.transpose(1, 2).reshape(b, s, d))
        return u + self.w2(torch.relu(self.w1(u)))


def best_of(repeat, fn):
    best = float("inf")
    for r in range(repeat + 1):
        t0 = time.perf_counter()
        fn()
        if r > 0:  # the first is the warm-up
            best = min(best, time.perf_counter() - t0)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", type=int, nargs="+", required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dh", type=int, default=8)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--max-gib", type=float, default=8.0)
    p.add_argument("--layers", type=int, default=1)
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

        def attn():
            attention(q, k, v).backward(g)
            for x in (q, k, v):
                x.grad = None

        print(f"torch-attn: S={s} ms={best_of(a.repeat, attn) * 1e3:.1f}", flush=True)
        d = a.heads * a.dh
        model = torch.nn.Sequential(*[Block(d, a.heads) for _ in range(a.layers)])
        opt = torch.optim.AdamW(model.parameters(), lr=0.003)
        x, y = torch.rand(a.batch, s, d) * 2 - 1, torch.rand(a.batch, s, d) * 2 - 1

        def step():
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

        print(f"torch-step: S={s} ms={best_of(a.repeat, step) * 1e3:.1f}", flush=True)


if __name__ == "__main__":
    main()
