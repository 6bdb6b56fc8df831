#!/usr/bin/env python3
"""The PyTorch peer of bench_scaling: DDP over Gloo on the same MLP (784-256-128-10, Adam), batch
--batch per replica, one thread per replica, --workers processes on this host. Prints one JSON line:
{"workers": N, "samples_per_second": ...} (training steps only, after --warmup untimed steps)."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


def run(rank, args, port, queue):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=0.002)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(rank)
    x = torch.rand(args.batch, 784, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)

    def step():
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        queue.put(args.workers * args.batch * args.steps / elapsed)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--port", type=int, default=29533)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(run, args=(args, args.port, queue), nprocs=args.workers, join=True)
    print(json.dumps({"workers": args.workers, "samples_per_second": queue.get(timeout=60)}))


if __name__ == "__main__":
    main()
