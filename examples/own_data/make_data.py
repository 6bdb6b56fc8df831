#!/usr/bin/env python3
"""Writes a small dataset of your own as .npy files, the way you would from NumPy: 3 classes of
points in 8 dimensions (a Gaussian blob per class), 3,000 to train on and 600 to validate.

    python3 examples/own_data/make_data.py DIR
    troupe data inspect DIR
    troupe train --lib build-user/libuser_trainer.so --trainer logreg --data DIR --epochs 5

troupe reads DIR as a dataset: x_train.npy and y_train.npy are the fields x and y of the split
"train", x_val.npy and y_val.npy those of "val" (the split is the word in the file name); y is the
target (its name says so), x the input.
"""
import os
import sys

import numpy as np

out = sys.argv[1] if len(sys.argv) > 1 else "own_data"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
centres = rng.normal(0, 3, (3, 8))
for split, n in (("train", 3000), ("val", 600)):
    y = rng.integers(0, 3, n)
    x = (centres[y] + rng.normal(0, 1, (n, 8))).astype(np.float32)
    np.save(os.path.join(out, "x_%s.npy" % split), x)
    np.save(os.path.join(out, "y_%s.npy" % split), y.astype(np.int64))
print("wrote %s/x_train.npy, y_train.npy (3000 examples), x_val.npy, y_val.npy (600)" % out)
