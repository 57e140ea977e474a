#!/usr/bin/python3
"""torch.distributed.all_reduce over NCCL, world size 1, on one GPU: the side-by-side
row for 03's library all-reduce at NP=1 (bench/gpu.sh).

Sizes from --min-bytes to --max-bytes, times --factor; float32 sum, out of place
as 03 calls it (the input copied to the output buffer, then all_reduce on it in
place: NCCL at world size 1 has nothing to send, so what is left is the copy and
the launch). --warmup untimed calls, then --iters timed calls, synchronised once
after them (CUDA events would read the same for one stream). Prints one line per
size: "torch_nccl bytes=B us=T algbw_GBps=G".
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--min-bytes", type=int, default=8)
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    print(f"torch_nccl: torch {torch.__version__} nccl {'.'.join(map(str, torch.cuda.nccl.version()))} "
          f"device {torch.cuda.get_device_name(0)}", flush=True)
    size = a.min_bytes
    while size <= a.max_bytes:
        n = max(1, size // 4)
        src = torch.ones(n, device="cuda")
        dst = torch.empty_like(src)

        def call():
            dst.copy_(src)
            dist.all_reduce(dst)

        for _ in range(a.warmup):
            call()
        torch.cuda.synchronize()
        t0 = torch.cuda.Event(enable_timing=True)
        t1 = torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(a.iters):
            call()
        t1.record()
        torch.cuda.synchronize()
        us = t0.elapsed_time(t1) * 1e3 / a.iters
        assert dst[0].item() == 1.0
        print(f"torch_nccl bytes={n * 4} us={us:.2f} algbw_GBps={n * 4 / us / 1e3:.3f}", flush=True)
        del src, dst
        size *= a.factor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
