#!/usr/bin/env python3
"""TorchScript fixtures for troupe's torch tests, written the way users write theirs.

    make_torch_fixtures.py OUT_DIR

OUT_DIR/small_cnn.pt      a scripted conv -> relu -> max-pool -> linear module for 1x8x8 inputs, 4 classes
OUT_DIR/fashion_mlp.pt    a scripted 784-64-10 MLP for Fashion-MNIST (the troupe train test)
OUT_DIR/fashion_mlp_state.safetensors  a state_dict of that MLP saved from Python (other values than
                          the module's: a model trained elsewhere, for --init-from)
OUT_DIR/small_cnn.json    one batch (x, y) and what PyTorch computes for it with that module: the
                          cross-entropy loss and every parameter's gradient (state_dict names)
OUT_DIR/wrong_width.pt    the same module scoring 3 classes (a data of 4 classes must be refused)
OUT_DIR/raises.pt         a module whose forward raises
OUT_DIR/not_torchscript.pt  a file that is not TorchScript
OUT_DIR/seq_cnn.pt        a scripted nn.Sequential for 1x8x8 inputs, 4 classes (conv, relu, pool, flatten,
                          linear, tanh, linear): three layers for pipelines and --shard parameters
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCnn(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(x.flatten(1))


class FashionMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(784, 64)
        self.out = nn.Linear(64, 10)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x.flatten(1))))


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 4)

    def forward(self, x):
        if x.size(0) > 0:
            raise RuntimeError("this module refuses every batch")
        return self.fc(x.flatten(1))


def save_safetensors(state, path):
    """A state_dict as safetensors (8-byte header length, JSON header, the tensors' bytes), as the
    safetensors package writes it."""
    header, blobs, offset = {}, [], 0
    for name, tensor in state.items():
        data = tensor.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    model = torch.jit.script(SmallCnn())
    model.save(os.path.join(out, "small_cnn.pt"))
    torch.jit.script(SmallCnn(classes=3)).save(os.path.join(out, "wrong_width.pt"))
    torch.jit.script(Raises()).save(os.path.join(out, "raises.pt"))
    mlp = FashionMlp()
    torch.jit.script(mlp).save(os.path.join(out, "fashion_mlp.pt"))
    elsewhere = {name: value + 0.02 * torch.randn(value.shape, generator=torch.Generator().manual_seed(i))
                 for i, (name, value) in enumerate(mlp.state_dict().items())}
    save_safetensors(elsewhere, os.path.join(out, "fashion_mlp_state.safetensors"))
    torch.jit.script(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                   nn.Linear(4 * 4 * 4, 16), nn.Tanh(), nn.Linear(16, 4))).save(
        os.path.join(out, "seq_cnn.pt"))
    with open(os.path.join(out, "not_torchscript.pt"), "w") as f:
        f.write("a text file, not a TorchScript archive\n")

    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, 1, 8, 8, generator=g)
    y = torch.tensor([0, 1, 2, 3, 1, 2])
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    reference = {
        "x": x.flatten().tolist(),
        "y": y.tolist(),
        "loss": loss.item(),
        "grads": {n: p.grad.flatten().tolist() for n, p in model.named_parameters()},
        "params": {n: p.detach().flatten().tolist() for n, p in model.named_parameters()},
    }
    with open(os.path.join(out, "small_cnn.json"), "w") as f:
        json.dump(reference, f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
