#!/usr/bin/env python3
"""A PyTorch model trained by troupe without any C++ (docs/torch.md): script it and save it, then

    troupe train --model torchscript:fashion_cnn.pt --trainer-arg input_shape=1,28,28 --save model.safetensors

and load what troupe saved back into the same module:

    python3 model.py --load model.safetensors
"""
import argparse

import torch
import torch.nn as nn


class FashionCnn(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="fashion_cnn.pt")
    p.add_argument("--load", help="a safetensors file troupe saved (--save): load it into the module")
    a = p.parse_args()
    model = FashionCnn()
    if a.load:
        from safetensors.numpy import load_file  # or read the file's header with numpy alone
        model.load_state_dict({k: torch.from_numpy(v) for k, v in load_file(a.load).items()})
        print("loaded", a.load)
        return
    torch.jit.script(model).save(a.out)
    print("saved", a.out)


if __name__ == "__main__":
    main()
