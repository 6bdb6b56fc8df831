#!/usr/bin/env python3
"""Scripts the modules bench/torch_ddp.sh trains into DIR (TorchScript files, torch.jit.script):
mlp (784-256-128-10), wide (784-1024-1024-10) and cnn (two 3x3 convolutions of 16 and 32 channels,
each with ReLU and 2x2 max-pooling, then a linear layer to 10 classes; input [B, 1, 28, 28]).

    /usr/bin/python3 bench/peers/torch_modules.py DIR
"""
import os
import sys

import torch
import torch.nn as nn


def modules():
    torch.manual_seed(3)
    yield "mlp", nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    yield "wide", nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                nn.Linear(1024, 10))
    yield "cnn", nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, module in modules():
        torch.jit.script(module).save(os.path.join(out, name + ".pt"))
        print(name, sum(p.numel() for p in module.parameters()), "parameters")


if __name__ == "__main__":
    main()
