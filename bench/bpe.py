#!/usr/bin/python3
"""The byte-level BPE of a 14_gpt --tokens bpe:N file, in plain Python: its
merges read from the file's metadata ("merges": "a b a b ...", token 256 + k
joins the k-th pair), minbpe's algorithms written the plain way (a full
recount of the pairs before each merge, the most frequent first, ties to
the lowest pair; encode: the lowest-ranked pair first), and decoding. No
torch: bench/nanogpt_load.py imports it to sample a BPE file.

Usage (no network): /usr/bin/python3 bench/bpe.py FILE --text TEXT
  learns the file's number of merges from TEXT's training split (its first
  90% of bytes, as 14_gpt does) the plain way and says whether they are the
  file's, then the token counts of the two splits, encoded apart.
"""
import argparse
import json
import struct
import sys


def read_meta(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__", {})


def merges_of(meta):
    ids = [int(x) for x in meta["merges"].split()]
    return [(ids[2 * k], ids[2 * k + 1]) for k in range(len(ids) // 2)]


def learn(data, n):
    """minbpe's BasicTokenizer.train, ties to the lowest pair; stops where
    no pair occurs twice"""
    ids, merges = list(data), []
    for k in range(n):
        counts = {}
        for p in zip(ids, ids[1:]):
            counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], p))
        if counts[pair] < 2:
            break
        merges.append(pair)
        ids = merge(ids, pair, 256 + k)
    return merges


def merge(ids, pair, z):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(z)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def encode(data, merges):
    """minbpe's encode: the pair of the lowest merge rank first"""
    rank = {p: k for k, p in enumerate(merges)}
    ids = list(data)
    while len(ids) >= 2:
        pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, len(merges)))
        if pair not in rank:
            break
        ids = merge(ids, pair, 256 + rank[pair])
    return ids


def decode(ids, merges):
    """the bytes of the tokens (an id past the vocabulary, the padding, as
    U+FFFD)"""
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[a] + table[b])
    return b"".join(table[i] if i < len(table) else "\ufffd".encode() for i in ids)


def printable(data):
    """as 14_gpt prints a BPE text: UTF-8 characters as they are, a byte
    that starts none, or a control character but newline and tab, as \\xNN"""
    out = []
    for ch in data.decode("utf-8", errors="surrogateescape"):
        o = ord(ch)
        if 0xdc80 <= o <= 0xdcff:  # a byte that is not UTF-8 there
            out.append("\\x%02x" % (o - 0xdc00))
        elif ch in "\n\t" or (o >= 0x20 and o != 0x7f and not 0x80 <= o < 0xa0):
            out.append(ch)
        else:
            out.append("".join("\\x%02x" % b for b in ch.encode()))
    return "".join(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--text", required=True)
    a = p.parse_args()
    meta = read_meta(a.file)
    if meta.get("tokens") != "bpe":
        sys.exit("%s: not a 14_gpt file of BPE tokens" % a.file)
    merges = merges_of(meta)
    data = open(a.text, "rb").read()
    split = len(data) * 9 // 10
    plain = learn(data[:split], len(merges))
    print("%s's %d merges against a plain learner's on the first %d bytes of %s: %s" % (
        a.file, len(merges), split, a.text, "the same" if plain == merges else "DIFFERENT"))
    train, val = encode(data[:split], merges), encode(data[split:], merges)
    back = decode(train, merges) + decode(val, merges)
    print("%s as %d BPE tokens, %d train, %d validation; decoded back: %s" % (
        a.text, len(train) + len(val), len(train), len(val),
        "the same bytes" if back == data else "OTHER BYTES"))


if __name__ == "__main__":
    main()
