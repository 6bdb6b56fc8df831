#!/usr/bin/env python3
"""PyTorch peer of bench_train_cpu: the same one-thread CPU training step, to run beside it.

MLP 784-256-128-10, batch 128, Adam (lr 0.002), one CPU thread (torch.set_num_threads(1)), random
batches drawn from Fashion-MNIST-shaped data held in memory (the gather is part of the step, as in
troupe). Prints the median samples/s over --runs jobs of --steps steps after a warm-up and, given
--troupe N (bench_train_cpu's median samples/s), the ratio troupe / PyTorch.

    python3 bench/pytorch_mlp_cpu.py [--runs 7] [--steps 200] [--troupe N]
"""
import argparse
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--troupe", type=float, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    x_all = torch.rand(60000, 784)
    y_all = torch.randint(0, 10, (60000,))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=0.002)
    loss_fn = torch.nn.CrossEntropyLoss()

    def job(steps):
        perm = torch.randperm(60000)
        t0 = time.perf_counter()
        for s in range(steps):
            idx = perm[s * a.batch:(s + 1) * a.batch]
            x, y = x_all[idx], y_all[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        float(loss.detach())
        return steps * a.batch / (time.perf_counter() - t0)

    job(20)
    rates = [job(a.steps) for _ in range(a.runs)]
    med = statistics.median(rates)
    print(f"pytorch {torch.__version__} cpu, 1 thread, batch {a.batch}, adam: median {med:,.0f} samples/s "
          f"(best {max(rates):,.0f}) over {a.runs} jobs x {a.steps} steps")
    if a.troupe > 0:
        print(f"troupe / pytorch = {a.troupe / med:.2f}x")


if __name__ == "__main__":
    main()
