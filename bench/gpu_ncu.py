#!/usr/bin/python3
"""Read bench/gpu.sh's ncu.csv (Nsight Compute, one metric: gpu__time_duration.sum
of every kernel of 05_dp) and print, for each whole step, the kernels' time, the
GEMMs' share of it, and the GEMMs' rate; then one step's kernels grouped by name.

A step is the kernels from one mse_kernel (the loss) to the next: the backward,
the SGD update and the next step's forward. The GEMM FLOPs are 2 x M x N x K of
each of 05's six products a layer ([B,D]x[D,H] and their backward), and of the
two by which the step makes its targets (the teacher block, [B,D]x[D,D]): pass
the model with --layers --dim --hidden --batch (defaults: the bench's model).

Usage: /usr/bin/python3 bench/gpu_ncu.py bench/gpu-h200/run1-ncu.csv
"""
import argparse
import collections
import csv


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--batch", type=int, default=256)
    a = p.parse_args()
    with open(a.csv) as f:
        rows = list(csv.DictReader(line for line in f if line.startswith('"')))
    kern = [(r["Kernel Name"].split("(")[0].replace("void ", ""),
             float(r["Metric Value"].replace(",", "")) / 1e3) for r in rows]  # us
    assert all(r["Metric Unit"] == "ns" for r in rows)
    gemm = lambda n: "gemm" in n or "splitKreduce" in n  # noqa: E731
    flops = 6 * a.layers * 2 * a.batch * a.dim * a.hidden + 2 * 2 * a.batch * a.dim * a.dim
    loss = [i for i, (n, _) in enumerate(kern) if n.startswith("mse_kernel")]
    print(f"{len(kern)} kernels; GEMM FLOPs a step 6 x L x 2BDH + 2 x 2BDD = {flops / 1e9:.1f} G")
    print("step  kernels  kernel us  GEMM us  GEMM share  GEMM TFLOP/s")
    for s, (i, j) in enumerate(zip(loss, loss[1:]), 1):
        tot = sum(t for _, t in kern[i:j])
        g = sum(t for n, t in kern[i:j] if gemm(n))
        print(f"{s:4d} {j - i:8d} {tot:10.1f} {g:8.1f} {g / tot:10.3f} {flops / g / 1e6:13.1f}")
    i, j = loss[-2], loss[-1]
    by = collections.defaultdict(lambda: [0, 0.0])
    for n, t in kern[i:j]:
        by[n][0] += 1
        by[n][1] += t
    print("\none step's kernels by name (the last whole step)")
    print("  calls   total us   us a call  kernel")
    for n, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"{c:7d} {t:10.1f} {t / c:11.1f}  {n[:90]}")


if __name__ == "__main__":
    main()
