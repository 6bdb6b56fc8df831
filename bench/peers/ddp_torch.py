#!/usr/bin/env python3
"""The PyTorch peer of bench/torch_ddp.sh: DistributedDataParallel over Gloo on a TorchScript file,
--workers processes of one thread on this host, each replica --batch examples of Fashion-MNIST a
step (rank r takes rows r*B.. of each global batch of a seeded permutation), SGD with momentum.
Prints one JSON line: {"samples_per_second": S, "compute_samples_per_second": C} — the second from the
same steps under ddp.no_sync() (no all-reduce), so 1 - S/C is the share of a step spent communicating.

    python3 bench/peers/ddp_torch.py MODULE.pt [--workers 2] [--batch 64] [--steps 300] [--input-shape 784]
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"


def fashion_mnist():
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def timed(ddp, opt, x_all, y_all, perm, shape, args, rank, communicate):
    loss_fn = nn.CrossEntropyLoss()
    glob = args.batch * args.workers

    def step(s):
        idx = perm[(s * glob + rank * args.batch) % len(perm):][:args.batch]
        x, y = x_all[idx].reshape([len(idx)] + shape), y_all[idx]
        opt.zero_grad(set_to_none=True)
        if communicate:
            loss_fn(ddp(x), y).backward()
        else:
            with ddp.no_sync():
                loss_fn(ddp(x), y).backward()
        opt.step()

    for s in range(args.warmup):
        step(s)
    dist.barrier()
    t0 = time.perf_counter()
    for s in range(args.steps):
        step(args.warmup + s)
    dist.barrier()
    return glob * args.steps / (time.perf_counter() - t0)


def run(rank, args, queue):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.manual_seed(1)
    model = torch.jit.load(args.module)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)
    x_all, y_all = fashion_mnist()
    perm = torch.randperm(len(x_all), generator=torch.Generator().manual_seed(7))
    shape = [int(d) for d in args.input_shape.split(",")]
    synced = timed(ddp, opt, x_all, y_all, perm, shape, args, rank, True)
    alone = timed(ddp, opt, x_all, y_all, perm, shape, args, rank, False)
    if rank == 0:
        queue.put({"samples_per_second": synced, "compute_samples_per_second": alone})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("module")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="examples per replica and step")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--input-shape", default="784")
    p.add_argument("--port", type=int, default=29541)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(run, args=(args, queue), nprocs=args.workers, join=True)
    print(json.dumps(queue.get(timeout=60)))


if __name__ == "__main__":
    main()
