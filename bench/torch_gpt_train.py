#!/usr/bin/python3
"""14_gpt's training run again in PyTorch, for `make bench-gpt` (bench/gpt.sh).

The same model (bench/torch_gpt.py's GPT: nanoGPT's with bias=False and
GELU's tanh form), from the same initial weights (14_gpt --steps 0 --save),
on the same token windows step by step (14_gpt --dump-data: tokens [steps,
B, S+1]), with the same optimiser and schedule (AdamW as nanoGPT configures
it, betas (0.9, beta2), weight decay on the tensors of two dimensions or
more, clipping; nanoGPT's get_lr), on --threads threads. Prints the time of
each training iteration (evaluation left out, as 14_gpt leaves it out), and
every --eval-every steps the train and validation loss on fixed batches
(nanoGPT's estimate_loss: --eval-batches batches of B random windows of
each split, here drawn once from a seeded generator). With --final (14_gpt's
--save after the same steps) it evaluates that model on the same batches
too, so the two validation losses are compared on the same windows.
"""
import argparse
import math
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, read_safetensors  # noqa: E402


def lr_at(it, lr, warmup, decay):  # nanoGPT's get_lr, as common/train/model.c's dt_lr_at
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return lr / 10
    coeff = 0.5 * (1.0 + math.cos(math.pi * (it - warmup) / (decay - warmup)))
    return lr / 10 + coeff * (lr - lr / 10)


def model_from(path):
    tensors, meta = read_safetensors(path)
    model = GPT(meta)
    state = dict(tensors)
    state["lm_head.weight"] = tensors["transformer.wte.weight"]
    model.load_state_dict(state, strict=True)
    return model, meta


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--init", required=True, help="14_gpt --steps 0 --save FILE")
    p.add_argument("--data", required=True, help="14_gpt --dump-data FILE")
    p.add_argument("--text", required=True, help="the text the run trained on")
    p.add_argument("--final", default="", help="14_gpt --save FILE after the same steps")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model, meta = model_from(a.init)
    tokens = read_safetensors(a.data)[0]["tokens"].long()  # [steps, B, S + 1]
    steps, B, S = tokens.shape[0], tokens.shape[1], tokens.shape[2] - 1
    lr, warmup, decay = float(meta["lr"]), int(meta["warmup"]), int(meta["lr_decay_steps"])
    vocab = meta["vocab"]
    stoi = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([stoi[c] for c in open(a.text, encoding="utf-8").read()])
    train_n = len(ids) * 9 // 10  # 14_gpt's split: the first 90% trains
    splits = {"train": ids[:train_n], "val": ids[train_n:]}
    g = torch.Generator().manual_seed(1337)
    batches = {k: [torch.randint(len(v) - S, (B,), generator=g) for _ in range(a.eval_batches)]
               for k, v in splits.items()}

    def estimate(m):
        m.eval()
        out = {}
        with torch.no_grad():
            for k, v in splits.items():
                losses = [m(torch.stack([v[i:i + S] for i in ix]),
                            torch.stack([v[i + 1:i + 1 + S] for i in ix])).item()
                          for ix in batches[k]]
                out[k] = sum(losses) / len(losses)
        m.train()
        return out

    params = dict(model.named_parameters())
    groups = [{"params": [q for q in params.values() if q.dim() >= 2],
               "weight_decay": float(meta["weight_decay"])},
              {"params": [q for q in params.values() if q.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, float(meta["beta2"])), eps=1e-8)
    clip = float(meta["clip"])
    print("PyTorch %s, %d thread(s): L=%s D=%s heads %s S=%d V=%s, B=%d, %d steps, lr %g "
          "(warm-up %d, cosine to lr/10 at %d)" % (torch.__version__, torch.get_num_threads(),
                                                    meta["n_layer"], meta["n_embd"],
                                                    meta["n_head"], S, meta["vocab_size"], B,
                                                    steps, lr, warmup, decay))
    total, timed = 0.0, 0
    for it in range(steps):
        t0 = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, lr, warmup, decay)
        x = tokens[it]
        loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        dt = time.perf_counter() - t0
        if it > 0:  # the first step warms the allocator, as 14_gpt leaves its first out
            total += dt
            timed += 1
        if it == 0 or (it + 1) % max(1, steps // 10) == 0:
            print("step %5d/%d  loss %.6f  %.2f ms" % (it + 1, steps, loss.item(), 1e3 * dt))
        if a.eval_every > 0 and ((it + 1) % a.eval_every == 0 or it + 1 == steps):
            e = estimate(model)
            print("eval after step %d: train loss %.4f, validation loss %.4f" % (
                it + 1, e["train"], e["val"]))
    print("time per iteration: %.2f ms (the mean of steps 2 to %d)" % (
        1e3 * total / max(1, timed), steps))
    if a.final:
        ours, _ = model_from(a.final)
        e, mine = estimate(ours), estimate(model)
        print("the same %d x %d windows of each split: validation loss 14_gpt %.4f, PyTorch %.4f "
              "(difference %.4f); train loss 14_gpt %.4f, PyTorch %.4f" % (
                  a.eval_batches, B, e["val"], mine["val"], e["val"] - mine["val"], e["train"],
                  mine["train"]))


if __name__ == "__main__":
    main()
