#!/usr/bin/env python3
"""A model troupe saved (--save FILE.safetensors) loaded into the PyTorch module it was trained from, as
a user does, and evaluated on the Fashion-MNIST test split in Python.

    evaluate_saved.py MODULE.pt SAVED.safetensors FASHION_MNIST_DIR

Prints one JSON line: {"accuracy": ..., "missing": [...], "unexpected": [...]}. Reads the safetensors
file by its format (8-byte header length, JSON header, little-endian data) with numpy only.
"""
import gzip
import json
import struct
import sys

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    state = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name + ": " + t["dtype"]
        begin, end = t["data_offsets"]
        state[name] = torch.from_numpy(np.frombuffer(data[begin:end], dtype="<f4").reshape(t["shape"]).copy())
    return state


def fashion_test(directory):
    with gzip.open(directory + "/t10k-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(directory + "/t10k-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    return torch.from_numpy(images.astype(np.float32) / 255.0), torch.from_numpy(labels.astype(np.int64))


def main(module, saved, directory):
    model = torch.jit.load(module)
    result = model.load_state_dict(read_safetensors(saved), strict=False)
    model.eval()
    x, y = fashion_test(directory)
    with torch.no_grad():
        correct = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum()) for i in range(0, len(y), 1000))
    print(json.dumps({"accuracy": correct / len(y), "missing": list(result.missing_keys),
                      "unexpected": list(result.unexpected_keys)}))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
