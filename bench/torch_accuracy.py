#!/usr/bin/env python3
"""The Python side of bench/torch_accuracy.sh: a scripted module trained in PyTorch on Fashion-MNIST as
troupe trains it — pixels / 255, the training set shuffled each epoch, batches of --batch (the last
partial one dropped), SGD with --lr (--schedule: cosine decay to 0 over the run per step, troupe's
default, or constant) and --momentum, cross-entropy — then its test accuracy in eval
mode (BatchNorm's running statistics). Prints one JSON line: {"accuracy", "epochs", "seconds"}.
With --split N each batch's forward runs on N equal parts (BatchNorm normalising each part by its own
statistics, as each of N DDP or troupe sync replicas does; the parts' mean loss back-propagated): one
process standing in for N replicas, without DDP's broadcast of rank 0's buffers. With --average-buffers
the buffers then move by the mean of the parts' changes, as troupe's sync replicas average them.

    /usr/bin/python3 bench/torch_accuracy.py MODULE.pt FASHION_MNIST_DIR [--epochs 2] [--batch 64]
        [--lr 0.05] [--momentum 0.9] [--schedule cosine|constant] [--split 1] [--average-buffers]
        [--seed 1] [--threads 2]
"""
import argparse
import gzip
import json
import time

import numpy as np
import torch
import torch.nn.functional as F


def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def split(directory, name):
    x = idx(f"{directory}/{name}-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28).astype(np.float32) / 255.0
    y = idx(f"{directory}/{name}-labels-idx1-ubyte.gz", 8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def step(model, x, y, rows, a):
    """Forward and backward of one batch in a.split parts; with a.average_buffers every part starts
    from the same buffers and they end moved by the parts' mean change."""
    buffers = [b for b in model.buffers()]
    start = [b.clone() for b in buffers]
    changes = [torch.zeros_like(b, dtype=torch.float64) for b in buffers]
    for part in rows.chunk(a.split):
        if a.average_buffers:
            for b, s in zip(buffers, start):
                b.copy_(s)
        (F.cross_entropy(model(x[part]), y[part]) / a.split).backward()
        for c, b, s in zip(changes, buffers, start):
            c += (b.double() - s.double()) / a.split
    if a.average_buffers:
        with torch.no_grad():
            for b, s, c in zip(buffers, start, changes):
                b.copy_(s.double() + c)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("module")
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--split", type=int, default=1)
    p.add_argument("--average-buffers", action="store_true")
    p.add_argument("--schedule", choices=["constant", "cosine"], default="cosine")  # troupe's --lr-schedule
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    model = torch.jit.load(a.module)
    x, y = split(a.data, "train")
    tx, ty = split(a.data, "t10k")
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    steps = a.epochs * (len(y) // a.batch)  # cosine: decayed to 0 over the run, per step, as troupe's
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if a.schedule == "cosine" else None
    start = time.perf_counter()
    for _ in range(a.epochs):
        model.train()
        order = torch.randperm(len(y))
        for s in range(len(y) // a.batch):
            rows = order[s * a.batch:(s + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            step(model, x, y, rows, a)
            opt.step()
            if sched:
                sched.step()
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum()) for i in range(0, len(ty), 1000))
    print(json.dumps({"accuracy": correct / len(ty), "epochs": a.epochs,
                      "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
