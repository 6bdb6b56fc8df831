#!/usr/bin/env python3
"""A PyTorch model trained by troupe without any C++ (docs/torch.md): script it, save it, train it.

    /usr/bin/python3 examples/torch_model/model.py fashion_cnn.pt
    troupe train --model torchscript:fashion_cnn.pt --trainer-arg input_shape=1,28,28 --save model.safetensors

model.safetensors holds the module's state_dict under its own names: in Python,
FashionCnn().load_state_dict({k: torch.from_numpy(v) for k, v in safetensors.numpy.load_file(path).items()}).
"""
import sys

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


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "fashion_cnn.pt"
    torch.jit.script(FashionCnn()).save(out)
    print("saved", out)
