#!/usr/bin/env python3
"""The same job as bench_train_gpu in PyTorch, to run beside it on the same GPU.

MLP 784-256-128-10 (or, with --model cnn, troupe's cnn: conv3x3 32 + ReLU + 2x2 max-pool, conv3x3
64 + ReLU + 2x2 max-pool, dense 256, dense 10) on Fashion-MNIST, batch 128, full batches only (the last partial one dropped),
data on the GPU, one shuffled copy of the training set per epoch (as troupe does), Adam (lr 0.002)
or SGD (lr 0.05, momentum 0.9). Modes: eager, and the standard CUDA-graph recipe (one captured
step; each batch copied into the static input). Prints the median training samples/s over --runs
runs of --epochs epochs after a warm-up, and, given --troupe N (troupe's samples/s), the ratio.

    python3 bench/pytorch_mlp.py --data-dir DIR [--model mlp|cnn] [--optimizer adam|sgd] [--tf32]
                                 [--precision f32|bf16|f16] [--troupe N]

Strict f32 by default (no TF32 in matmuls or convolutions), as troupe computes; --tf32 allows it in
cuDNN's convolutions (PyTorch's own default), to compare with `bench_train_gpu --model cnn --tf32`.
cuDNN autotuning (torch.backends.cudnn.benchmark) is on: PyTorch gets its fastest convolutions.
"""
import argparse
import gzip
import os
import statistics
import struct
import time

import numpy as np
import torch


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(data_dir, split):
    x = load_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz")).reshape(-1, 784)
    y = load_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return (torch.from_numpy(x.astype(np.float32) / 255.0).cuda(), torch.from_numpy(y.astype(np.int64)).cuda())


def make(opt_name, kind):
    nn = torch.nn
    if kind == "cnn":
        model = nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                              nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(64 * 7 * 7, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
    else:
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10)).cuda()
    if opt_name == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=0.002, capturable=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, opt


def run(mode, opt_name, kind, xtr, ytr, epochs, batch, precision="f32"):
    model, opt = make(opt_name, kind)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = xtr.shape[0] // batch
    static_x = torch.zeros(batch, 784, device="cuda")
    static_y = torch.zeros(batch, dtype=torch.int64, device="cuda")
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(precision)
    # f16 as PyTorch users run it: autocast + GradScaler (its inf check reads back to the host, so
    # f16 runs eager only); bf16: autocast alone.
    scaler = torch.cuda.amp.GradScaler() if precision == "f16" else None

    def step(x, y):
        opt.zero_grad(set_to_none=False)
        # cache_enabled=False: autocast's weight cache must not outlive a captured graph (PyTorch docs)
        with torch.autocast("cuda", dtype=low, enabled=low is not None, cache_enabled=False):
            loss = loss_fn(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    graph = None
    if mode == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up iterations on a side stream, as the recipe requires
            for _ in range(3):
                step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_loss = step(static_x, static_y)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for epoch in range(epochs):
        perm = torch.randperm(xtr.shape[0], device="cuda")
        xs, ys = xtr[perm], ytr[perm]
        for s in range(steps):
            xb, yb = xs[s * batch:(s + 1) * batch], ys[s * batch:(s + 1) * batch]
            if graph is not None:
                static_x.copy_(xb)
                static_y.copy_(yb)
                graph.replay()
            else:
                step(xb, yb)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return steps * batch * epochs / seconds, model


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default=os.environ.get("TROUPE_DATASET_DIR", "/usr/share/datasets/fashion-mnist"))
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--tf32", action="store_true", help="let cuDNN's convolutions use TF32 tensor cores")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16", "f16"],
                   help="autocast to bf16, or f16 with GradScaler (eager only: its check syncs)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--troupe", type=float, default=0, help="troupe's samples/s, to print the ratio")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # strict f32, as troupe's cuBLAS calls
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.backends.cudnn.benchmark = True
    xtr, ytr = load(a.data_dir, "train")
    xte, yte = load(a.data_dir, "t10k")
    name = "cnn conv3x3 32-64 dense 256-10" if a.model == "cnn" else "mlp 784-256-128-10"
    name += " (tf32 convolutions)" if a.tf32 else " (strict f32)"
    if a.precision != "f32":
        name += f", autocast {a.precision}"
    print(f"# pytorch {torch.__version__} on {torch.cuda.get_device_name(0)}; {name}, batch {a.batch}, "
          f"{a.optimizer}, {a.epochs} epochs per run, median of {a.runs} runs")
    results = {}
    for mode in ("eager",) if a.precision == "f16" else ("eager", "graph"):
        run(mode, a.optimizer, a.model, xtr, ytr, 1, a.batch, a.precision)  # warm-up
        sps, accs = [], []
        for _ in range(a.runs):
            v, model = run(mode, a.optimizer, a.model, xtr, ytr, a.epochs, a.batch, a.precision)
            sps.append(v)
            accs.append(accuracy(model, xte, yte))
        results[mode] = statistics.median(sps)
        print(f"pytorch_{mode:5s} samples/s: {results[mode]:12.0f}   (min {min(sps):.0f}, max {max(sps):.0f}; "
              f"test acc {statistics.median(accs):.4f})")
    if a.troupe > 0:
        for mode, v in results.items():
            print(f"ratio troupe / pytorch_{mode}: {a.troupe / v:.2f}x")


if __name__ == "__main__":
    main()
