#!/usr/bin/env python3
"""TorchScript fixtures for troupe's torch tests, written the way users write theirs.

    make_torch_fixtures.py OUT_DIR

OUT_DIR/small_cnn.pt      a scripted conv -> relu -> max-pool -> linear module for 1x8x8 inputs, 4 classes
OUT_DIR/fashion_mlp.pt    a scripted 784-64-10 MLP for Fashion-MNIST (the troupe train test)
OUT_DIR/fashion_mlp_state.safetensors  a state_dict of that MLP saved from Python (other values than
                          the module's: a model trained elsewhere, for --init-from)
OUT_DIR/small_cnn.json    one batch (x, y) and what PyTorch computes for it with that module: the
                          cross-entropy loss and every parameter's gradient (state_dict names)
OUT_DIR/small_bn_cnn.pt   conv -> batchnorm -> relu -> max-pool -> linear for 1x8x8 inputs, 4 classes
OUT_DIR/small_bn_cnn.json one batch and what PyTorch computes for it in training mode: the loss, every
                          parameter's gradient, and every buffer after the forward (running statistics)
OUT_DIR/small_bn_cnn_state.safetensors  a state_dict of that module with other values, saved as the
                          safetensors package saves it: num_batches_tracked as I64 (for --init-from)
OUT_DIR/fashion_bn_cnn.pt a scripted Conv2d-BatchNorm2d-ReLU-pool x2 -> Linear CNN for Fashion-MNIST
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


class SmallBnCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


class FashionBnCnn(nn.Module):
    """Small enough to train an epoch of Fashion-MNIST in seconds on one core."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 7 * 7, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
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
    safetensors package writes it: floating tensors F32, int64 ones (num_batches_tracked) I64."""
    header, blobs, offset = {}, [], 0
    for name, tensor in state.items():
        integer = tensor.dtype == torch.int64
        data = tensor.detach().contiguous().numpy().astype("<i8" if integer else "<f4").tobytes()
        header[name] = {"dtype": "I64" if integer else "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
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
    write_dropout_fixtures(out)
    with open(os.path.join(out, "not_torchscript.pt"), "w") as f:
        f.write("a text file, not a TorchScript archive\n")

    g = torch.Generator().manual_seed(11)
    x = torch.randn(6, 1, 8, 8, generator=g)
    y = torch.tensor([0, 1, 2, 3, 1, 2])
    write_bn_fixtures(out, x, y)
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


def write_dropout_fixtures(out):
    """Chains with dropout: what a training step draws must follow the job's seed and the batch."""
    torch.manual_seed(10)
    torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Dropout(0.5),
                                   nn.Linear(16, 4))).save(os.path.join(out, "dropout_mlp.pt"))
    torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Dropout(0.2),
                                   nn.Linear(64, 10))).save(os.path.join(out, "fashion_dropout_mlp.pt"))


def write_bn_fixtures(out, x, y):
    torch.manual_seed(8)
    bn = torch.jit.script(SmallBnCnn())
    bn.save(os.path.join(out, "small_bn_cnn.pt"))
    other = {name: (value + 1 if value.dtype == torch.int64 else
                    value.abs() + 0.5 if "running_var" in name else value + 0.1)
             for name, value in bn.state_dict().items()}
    save_safetensors(other, os.path.join(out, "small_bn_cnn_state.safetensors"))
    bn.train()
    loss = F.cross_entropy(bn(x * 2 + 1), y)  # not zero-mean: the running statistics move
    loss.backward()
    reference = {
        "x": (x * 2 + 1).flatten().tolist(),
        "y": y.tolist(),
        "loss": loss.item(),
        "grads": {n: p.grad.flatten().tolist() for n, p in bn.named_parameters()},
        "buffers": {n: b.double().flatten().tolist() for n, b in bn.named_buffers()},
    }
    with open(os.path.join(out, "small_bn_cnn.json"), "w") as f:
        json.dump(reference, f)
    torch.manual_seed(9)
    torch.jit.script(FashionBnCnn()).save(os.path.join(out, "fashion_bn_cnn.pt"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
