#!/usr/bin/python3
"""A 14_gpt --save file into nanoGPT's own GPT (model.py of a nanoGPT
checkout, GPT(bias=False)), by name, then text from nanoGPT's generate.

14_gpt writes nanoGPT's state_dict names and layouts (transformer.wte.weight
[V, D], attn.c_attn.weight [3D, D] as nn.Linear stores it, ..., the head
tied to wte) and the GPTConfig in the file's metadata (n_layer, n_head,
n_embd, block_size, vocab_size, bias) with the vocabulary (the characters,
in token order; a --tokens bpe:N file's merges instead, which bench/bpe.py
reads, encodes and decodes with, printing as 14_gpt does). nanoGPT's MLP
has nn.GELU(), the erf form; 14_gpt's is GPT-2's tanh form (as llm.c's):
this script swaps it in, says so, and prints the loss on one window of the
text under both, so the difference is seen, not guessed.

Usage (after --save FILE; no network):
  /usr/bin/python3 bench/nanogpt_load.py FILE --nanogpt DIR [--prompt P]
      [--tokens N] [--temperature T] [--top-k K] [--seed S] [--text FILE]
"""
import argparse
import json
import os
import struct
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402  (torch-free: encodes and decodes BPE files)


def read_meta(path):
    """The metadata of a safetensors file, without torch: the checks below
    need only it, and run (with clear messages) before torch is imported."""
    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            return json.loads(f.read(n)).get("__metadata__", {})
    except (OSError, struct.error, ValueError) as e:
        sys.exit("%s: not a safetensors file (%s)" % (path, e))


def outside(chars, vocab, what):
    """Stop, with a message, on characters of `chars` the vocabulary lacks."""
    unknown = sorted(set(c for c in chars if c not in vocab))
    if unknown:
        sys.exit("%s: %d %s not in the file's vocabulary of %d (%s): its token ids cannot "
                 "spell %s" % (what, len(unknown), "character is" if len(unknown) == 1 else
                               "characters are", len(vocab),
                               ", ".join("%r" % c for c in unknown[:8]),
                               "it" if len(unknown) == 1 else "them"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--nanogpt", default=os.environ.get("NANOGPT", ""),
                   help="a nanoGPT checkout (its model.py)")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--text", default="", help="a text for the loss on one window (its vocabulary)")
    a = p.parse_args()
    meta = read_meta(a.file)
    if meta.get("model") != "gpt" or meta.get("tokens") not in ("char", "bpe"):
        sys.exit("%s: not a 14_gpt file of character or BPE tokens" % a.file)
    # BPE's byte-level merges spell any text; characters only their own
    merges = bpe.merges_of(meta) if meta["tokens"] == "bpe" else None
    vocab = meta.get("vocab", "")
    text = ""
    if a.text and merges is None:
        text = open(a.text, encoding="utf-8").read()[:int(meta["block_size"]) + 1]
        outside(text, vocab, "--text %s, its first window" % a.text)
    if merges is None:
        outside(a.prompt, vocab, "--prompt")
    if not a.nanogpt or not os.path.exists(os.path.join(a.nanogpt, "model.py")):
        sys.exit("--nanogpt DIR: a nanoGPT checkout, with model.py (git clone "
                 "https://github.com/karpathy/nanoGPT)")
    sys.path.insert(0, a.nanogpt)
    import torch
    from model import GPT, GPTConfig  # nanoGPT's
    from torch_gpt import read_safetensors

    tensors, meta = read_safetensors(a.file)
    if int(meta["hidden"]) != 4 * int(meta["n_embd"]):
        sys.exit("%s: hidden %s, nanoGPT's MLP is 4 x n_embd = %d wide" % (
            a.file, meta["hidden"], 4 * int(meta["n_embd"])))
    config = GPTConfig(block_size=int(meta["block_size"]), vocab_size=int(meta["vocab_size"]),
                       n_layer=int(meta["n_layer"]), n_head=int(meta["n_head"]),
                       n_embd=int(meta["n_embd"]), dropout=0.0, bias=False)
    model = GPT(config)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # lm_head.weight is wte's (tied); attn.bias is the causal mask, a buffer
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith(".attn.bias")]
    if missing or unexpected:
        sys.exit("not nanoGPT's names: missing %s, unexpected %s" % (missing, unexpected))
    same = model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    print("loaded %s into nanoGPT's GPT(%s): %d tensors by name, the head tied to wte: %s" % (
        a.file, ", ".join("%s=%s" % (k, getattr(config, k)) for k in
                          ("n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias")),
        len(tensors), "yes" if same else "NO"))
    model.eval()
    stoi = {c: i for i, c in enumerate(vocab)}
    if a.text and merges is not None:  # the first window of its first bytes, encoded alone
        head = open(a.text, "rb").read()[:32 * (config.block_size + 1)]
        ids = bpe.encode(head, merges)[:config.block_size + 1]
    elif a.text:
        ids = [stoi[c] for c in text]
    if a.text:
        x = torch.tensor([ids[:-1]])
        y = torch.tensor([ids[1:]])
        with torch.no_grad():
            erf = model(x, y)[1].item()
            for block in model.transformer.h:
                block.mlp.gelu = torch.nn.GELU(approximate="tanh")
            tanh = model(x, y)[1].item()
        print("loss on the first window of %s: %.9f with nanoGPT's GELU (erf), %.9f with "
              "14_gpt's (tanh)" % (a.text, erf, tanh))
    for block in model.transformer.h:  # 14_gpt's GELU, the tanh form
        block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    torch.manual_seed(a.seed)
    idx = torch.tensor([[stoi[c] for c in a.prompt] if merges is None else
                        bpe.encode(a.prompt.encode("utf-8"), merges)])
    with torch.no_grad():
        out = model.generate(idx, a.tokens, temperature=a.temperature,
                             top_k=a.top_k if a.top_k > 0 else None)
    # the padding rows (vocab_size - len(vocab)) are never drawn in practice:
    # they were never a target, so their logits sink; shown as '?' if ever
    print("nanoGPT's generate, %d tokens (temperature %g%s):" % (
        a.tokens, a.temperature, ", top-k %d" % a.top_k if a.top_k > 0 else ""))
    if merges is None:
        print("".join(vocab[i] if i < len(vocab) else "?" for i in out[0].tolist()))
    else:
        print(bpe.printable(bpe.decode(out[0].tolist(), merges)))


if __name__ == "__main__":
    main()
