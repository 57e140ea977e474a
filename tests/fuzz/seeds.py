#!/usr/bin/env python3
"""Writes the hand-made inputs of tests/fuzz/corpus/ from its real checkpoint.

corpus/safetensors/seed-checkpoint was written by
  mpirun -np 1 ./05_dp/dp --layers 2 --dim 4 --hidden 8 --batch 4 --samples 8 \
    --steps 2 --optimizer adamw --lr 0.01 --ckpt seed --save-every 2 --no-check
(the configuration tests/fuzz_safetensors.c reads with). Each input below
changes one number of it to one no reader may do arithmetic on unchecked."""
import os
import sys

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
seed = open(os.path.join(here, "safetensors", "seed-checkpoint"), "rb").read()
n = int.from_bytes(seed[:8], "little")
header, data = seed[8:8 + n], seed[8 + n:]


def write(name, head, body=data, length=None):
    length = len(head) if length is None else length
    with open(os.path.join(here, "safetensors", name), "wb") as f:
        f.write(length.to_bytes(8, "little") + head + body)


def swap(old, new):
    assert old in header, old
    return header.replace(old, new, 1)


M = 2**63 - 1
# issue 30: an end offset of INT64_MAX, begin set so that end - begin = 128
write("offset-int64max", swap(b'"data_offsets":[0,128]', b'"data_offsets":[%d,%d]' % (M - 128, M)))
write("offset-past-uint64", swap(b'"data_offsets":[0,128]', b'"data_offsets":[0,18446744073709551744]'))
write("offset-end-before-begin", swap(b'"data_offsets":[128,256]', b'"data_offsets":[256,128]'))
write("shape-int64max", swap(b'"shape":[4,8],"data_offsets":[0,128]', b'"shape":[%d,8],"data_offsets":[0,128]' % M))
write("shape-negative", swap(b'"shape":[4,8]', b'"shape":[-4,8]'))
write("step-past-uint64", swap(b'"step":"2"', b'"step":"99999999999999999999"'))
write("header-length-uint64max", header, length=2**64 - 1)
write("header-length-past-file", header, length=n + len(data) + 1)
write("truncated-data", header, body=data[:100])

manifests = {
    "good": b"step-00000002.safetensors\n",
    "step-past-int64": b"step-99999999999999999999.safetensors\n",
    "step-int64max": b"step-9223372036854775807.safetensors\n",
    "step-negative": b"step--0000002.safetensors\n",
    "unpadded": b"step-2.safetensors\n",
    "garbage": b"garbage",
    "empty": b"",
}
for name, text in manifests.items():
    with open(os.path.join(here, "manifest", name), "wb") as f:
        f.write(text)
print("wrote", len(os.listdir(os.path.join(here, "safetensors"))), "safetensors and",
      len(manifests), "manifest inputs under", here, file=sys.stderr)
