#!/usr/bin/python3
"""The GPT of common/train (DT_GPT) against PyTorch: nanoGPT's GPT with
bias=False, written here from the model's definition (common/train/train.h,
"gpt"): token and position embeddings, pre-norm blocks x += Attn(LN1(x)),
x += MLP(LN2(x)) with LayerNorm(bias=False, eps 1e-5), causal attention,
GELU's tanh form, a final LayerNorm and a head tied to the embedding, the
mean cross-entropy of the next token.

tests/gpt_run (our model through the training layer's run, in one process)
trains one step and writes the model before it (--save-initial), after it
(--save) and the batch (--dump-data), each by nanoGPT's names. This script
loads the first into its own module by those names, takes the same step on
the same tokens, and compares: the loss, and each tensor after the step (as
a fraction of how far the step moved it). Twice: SGD, which moves each
weight by lr x its gradient (so the gradients are compared too: ours as
(before - after) / lr), and AdamW as nanoGPT configures it (weight decay
0.1 on the tensors of two dimensions or more, none on the gains, betas
(0.9, 0.99), clipping at 1). AdamW's first step moves a weight by lr g /
(|g| + 1e-8): a gradient within rounding of 0 (its terms cancel) moves it
by a fraction of lr that rounding decides, so there the weights after the
step are held to lr, each such weight counted and its gradient shown.

Not in make test (CI may lack torch). Usage, after make:
  /usr/bin/python3 bench/torch_gpt.py [--bin tests/gpt_run] [--out build/torch-gpt]
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data, out = raw[8 + n:], {}
    for name, e in header.items():
        dtype = {"F32": torch.float32, "I32": torch.int32}[e["dtype"]]
        begin, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(e["shape"])
    return out, meta


class LayerNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, None, 1e-5)


class Attention(torch.nn.Module):
    def __init__(self, d, heads, block):
        super().__init__()
        self.heads = heads
        self.c_attn = torch.nn.Linear(d, 3 * d, bias=False)
        self.c_proj = torch.nn.Linear(d, d, bias=False)
        mask = torch.ones(block, block, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        p = torch.softmax(scores.masked_fill(self.mask[:s, :s], float("-inf")), dim=-1)
        return self.c_proj((p @ v).transpose(1, 2).reshape(b, s, d))


class MLP(torch.nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.c_fc = torch.nn.Linear(d, hidden, bias=False)
        self.c_proj = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, d, heads, block, hidden):
        super().__init__()
        self.ln_1, self.attn = LayerNorm(d), Attention(d, heads, block)
        self.ln_2, self.mlp = LayerNorm(d), MLP(d, hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        V, S, D, L = (int(m[k]) for k in ("vocab_size", "block_size", "n_embd", "n_layer"))
        heads, hidden = int(m["n_head"]), int(m["hidden"])
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(V, D), wpe=torch.nn.Embedding(S, D),
            h=torch.nn.ModuleList(Block(D, heads, S, hidden) for _ in range(L)),
            ln_f=LayerNorm(D)))
        self.lm_head = torch.nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied, as nanoGPT's

    def forward(self, idx, targets):
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1]))
        for block in t.h:
            x = block(x)
        logits = self.lm_head(t.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def one_step(args, optimizer, flags):
    """Our step (tests/gpt_run) and PyTorch's from the same weights and
    tokens, each tensor's figures; returns whether they agree."""
    out = os.path.join(args.out, optimizer)
    os.makedirs(out, exist_ok=True)
    files = {k: os.path.join(out, k + ".safetensors") for k in ("before", "after", "data")}
    cmd = [args.bin, "--steps", "1", "--warmup", "0", "--optimizer", optimizer, "--no-check",
           "--save-initial", files["before"], "--save", files["after"],
           "--dump-data", files["data"]] + args.model.split() + flags
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("%s failed:\n%s%s" % (" ".join(cmd), run.stdout, run.stderr))
    ours = float(run.stdout.split("the first step's loss, to the last digit: ")[1].split()[0])
    before, meta = read_safetensors(files["before"])
    after, _ = read_safetensors(files["after"])
    tokens = read_safetensors(files["data"])[0]["tokens"][0].long()  # step 0: [B, S + 1]
    model = GPT(meta)
    state = dict(before)
    state["lm_head.weight"] = before["transformer.wte.weight"]
    model.load_state_dict(state, strict=True)
    loss = model(tokens[:, :-1], tokens[:, 1:])
    loss.backward()
    lr = float(meta["lr"])
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    else:  # nanoGPT's configure_optimizers: decay the tensors of 2 dimensions or more
        params = dict(model.named_parameters())
        groups = [{"params": [p for p in params.values() if p.dim() >= 2],
                   "weight_decay": float(meta["weight_decay"])},
                  {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, float(meta["beta2"])), eps=1e-8)
    if float(meta["clip"]) > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(meta["clip"]))
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    opt.step()
    theirs = dict(model.named_parameters())
    print("%s, one step (lr %g%s): loss ours %.9f, PyTorch's %.9f, rel diff %.1e" % (
        optimizer, lr, ", clip %s" % meta["clip"] if float(meta["clip"]) > 0 else "", ours,
        loss.item(), abs(ours - loss.item()) / loss.item()))
    worst, ok, apart, apart_g, apart_lr, worst_g, read = 0.0, True, 0, 0.0, 0.0, 0.0, 0.0
    for name, w in after.items():
        t, g = theirs[name].detach(), grads[name]
        moved = (t - before[name]).abs().max().item()
        off = (w - t).abs()
        line = "  %-38s %-11s" % (name, list(w.shape))
        if optimizer == "sgd":  # our gradient from our step, lr g = before - after, to its float
            ours_g = (before[name].double() - w.double()) / lr  # resolution: w's spacing / lr
            ulp = (torch.nextafter(before[name], torch.tensor(math.inf)) - before[name]).max()
            resolution = ulp.item() / lr / g.abs().max().item()
            gerr = (ours_g - g.double()).abs().max().item() / g.abs().max().item()
            rel = off.max().item() / moved
            ok &= rel < args.bound and gerr < max(args.bound, 2 * resolution)
            worst_g, read = max(worst_g, gerr), max(read, resolution)
            line += " after: %.1e of the step's largest move; gradient %.1e of its largest " \
                    "(read to %.0e)" % (rel, gerr, resolution)
        else:  # AdamW: a gradient within rounding of 0 moves its weight by what rounding says
            near0 = off > args.bound * moved
            rel = off[~near0].max().item() / moved
            small = g.abs()[near0].max().item() / g.abs().max().item() if near0.any() else 0.0
            ok &= rel < args.bound and small < 1e-4 and off.max().item() <= lr
            line += " after: %.1e of the step's largest move" % rel
            apart += int(near0.sum())
            apart_g = max(apart_g, small)
            apart_lr = max(apart_lr, off.max().item() / lr)
            if near0.any():
                line += "; %d apart, by up to %.1e lr, their gradients at most %.1e of the " \
                        "largest" % (int(near0.sum()), off[near0].max().item() / lr, small)
        worst = max(worst, rel)
        if args.verbose or not ok:
            print(line)
    loss_rel = abs(ours - loss.item()) / loss.item()
    print("  every tensor after the step within %.1e of how far the step moved it%s" % (
        worst, "; each gradient within %.1e of its tensor's largest (the step reads it to %.0e)" % (
            worst_g, read) if optimizer == "sgd" else
        "; apart from that: %d weights, whose gradients are at most %.1e of their tensor's "
        "largest (within rounding of 0), each by at most %.1e lr" % (apart, apart_g, apart_lr)))
    return ok and loss_rel < 1e-6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="tests/gpt_run")
    ap.add_argument("--out", default="build/torch-gpt")
    ap.add_argument("--model", default="--layers 2 --dim 64 --heads 4 --seq 32 --batch 4",
                    help="gpt_run's flags of the model (the text is README.md)")
    ap.add_argument("--bound", type=float, default=1e-4, help="of the step, per tensor")
    ap.add_argument("--verbose", action="store_true", help="every tensor's figures")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("PyTorch %s; ours: %s %s" % (torch.__version__, args.bin, args.model))
    ok = one_step(args, "sgd", ["--lr", "1", "--clip", "0"])
    ok &= one_step(args, "adamw", ["--lr", "0.001"])
    print("torch_gpt: %s: the loss within 1e-6, every tensor within %.0e of its step, each "
          "gradient to the step's resolution" % ("PASSED" if ok else "FAILED", args.bound))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
