#!/usr/bin/python3
"""The lessons' model in PyTorch, for the side-by-side step times of the bench.

The same residual MLP as common/train/model.c: L blocks x <- x + relu(x W1) W2, no
biases, W1 [D, H] and W2 [H, D] drawn from uniform(-1/sqrt(fan_in),
1/sqrt(fan_in)) as our dt_init_w1/dt_init_w2; each step makes its global batch
as dt_make_batch does (x uniform in [-1, 1), y = x + relu(x T1) T2 from a fixed
teacher block of width D), the loss is mean((x_L - y)^2), the optimizer plain
SGD (lr 0.2, our default), and the loss is averaged over the ranks every step
(05 prints it every step from an all-reduce of one number). The values differ
from ours (another random generator); the work does not.

One thread per rank: OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 are set
before torch loads, and torch.set_num_threads(1). Ranks talk over gloo on
127.0.0.1 only. One untimed warm-up step, then --steps timed steps; prints
"torch: mode=M np=N ms_per_step=T" from rank 0 (the ranks wait for each other
every step).

  --device cuda  (single mode only) the same step on the GPU, fp32 with TF32 off
                 (as cuBLAS's default math in our cuda backend); the loss's .item()
                 each step synchronises, as 05 reads its loss every step

  --mode single  one process (N must be 1)
  --mode ddp     DistributedDataParallel (05's counterpart)
  --mode zero1   DDP + ZeroRedundancyOptimizer: optimizer state sharded (06 --zero 1)
  --mode fsdp    FullyShardedDataParallel, FULL_SHARD, one unit per block (06 --zero 3)

Usage: /usr/bin/python3 bench/torch_step.py --mode ddp --np 2 --layers 4 --dim 256 --hidden 1024 \
         --batch 64 --steps 40
"""
import argparse
import os
import socket
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(dim, hidden).uniform_(-dim**-0.5, dim**-0.5))
        self.w2 = nn.Parameter(torch.empty(hidden, dim).uniform_(-hidden**-0.5, hidden**-0.5))

    def forward(self, x):
        return torch.addmm(x, torch.relu(x @ self.w1), self.w2)  # x + relu(x W1) W2


class Model(nn.Module):
    def __init__(self, layers, dim, hidden):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, hidden) for _ in range(layers))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def worker(rank, a, port):
    torch.set_num_threads(1)
    torch.manual_seed(1)  # every rank the same model, as ours
    N = a.np
    if a.mode != "single":
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=N)
    dev = torch.device(a.device)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    model = Model(a.layers, a.dim, a.hidden).to(dev)
    teacher = Block(a.dim, a.dim).to(dev)
    for p in teacher.parameters():
        p.requires_grad_(False)
    if a.mode == "ddp" or a.mode == "zero1":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
    elif a.mode == "fsdp":
        try:  # Debian's torch 1.13 under Python 3.11 fails to import it (a dataclass default)
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp import ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        except Exception as e:  # noqa: BLE001
            if rank == 0:
                print(f"torch: mode=fsdp unavailable: {type(e).__name__}: {e}", flush=True)
            sys.exit(3)
        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                     auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=torch.device("cpu"))
    if a.mode == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=a.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    rows = a.batch // N
    gen = torch.Generator(device=dev).manual_seed(2 + rank)

    def step():
        with torch.no_grad():
            x = torch.rand(rows, a.dim, generator=gen, device=dev) * 2 - 1
            y = teacher(x)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        loss = loss.detach()
        if N > 1:
            dist.all_reduce(loss)
        return loss.item() / N

    for _ in range(1 if a.device == "cpu" else 5):
        step()  # warm-up, untimed (on the GPU: cuBLAS's heuristics and allocator settle)
    if N > 1:
        dist.barrier()
    if a.device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    per_step = (time.perf_counter() - t0) / a.steps
    if rank == 0:
        print(f"torch: mode={a.mode} device={a.device} np={N} ms_per_step={per_step * 1e3:.3f} "
              f"loss={loss:.6f} torch={torch.__version__} threads={torch.get_num_threads()}",
              flush=True)
    if N > 1:  # every rank waits for the others, then leaves at once: gloo's
        dist.barrier()  # teardown (destroy_process_group, interpreter exit) hung
        sys.stdout.flush()  # at times for minutes with all the work done
        os._exit(0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["single", "ddp", "zero1", "fsdp"], default="single")
    p.add_argument("--np", type=int, default=1)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    if a.device == "cuda" and a.mode != "single":
        sys.exit("torch_step.py: --device cuda runs --mode single only")
    if (a.mode == "single") != (a.np == 1) or a.batch % a.np:
        sys.exit("torch_step.py: --mode single needs --np 1 (and the others more), and --np must "
                 "divide --batch")
    if a.np == 1:
        worker(0, a, 0)
        return
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(a, port), nprocs=a.np, join=True)


if __name__ == "__main__":
    main()
