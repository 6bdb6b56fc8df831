// Test helper: fixtures written by NumPy itself (Debian's python3-numpy, run as /usr/bin/python3:
// a virtualenv's python may lack it), as users write their data. A missing NumPy fails the test
// naming the package (scripts/install-deps.sh installs it).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/core/temp_dir.h"

namespace troupe::testing {

// Runs `code` (Python, numpy imported as np) with the working directory `dir`; REQUIREs success.
inline void run_numpy(const std::string& dir, const std::string& code) {
  const std::string script = dir + "/fixture.py";
  {
    std::ofstream f(script);
    f << "import numpy as np, os, sys\nos.chdir(" << '"' << dir << '"' << ")\n" << code << "\n";
  }
  const std::string cmd = "/usr/bin/python3 " + script + " > " + dir + "/fixture.log 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(dir + "/fixture.log");
  std::string out((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  INFO("the fixture script failed (install python3-numpy: scripts/install-deps.sh): " << out);
  REQUIRE(rc == 0);
}

// Python defining idx(path): an IDX .gz file as a NumPy array, and src: the built-in dataset's folder.
inline std::string idx_py() {
  return std::string(R"PY(
import gzip
def idx(path):
    with gzip.open(path) as f: b = f.read()
    nd = b[3]; dims = [int.from_bytes(b[4+4*i:8+4*i], 'big') for i in range(nd)]
    return np.frombuffer(b[4+4*nd:], dtype=np.uint8).reshape(dims)
src = ')PY") + TROUPE_DEFAULT_DATASET_DIR + "'\n";
}

// Fashion-MNIST as NumPy users keep it: x_train.npy, y_train.npy (int64), x_test.npy, y_test.npy.
inline void write_fashion_npy(const std::string& dir) {
  run_numpy(dir, idx_py() + R"PY(
for s, p in (('train', 'train'), ('test', 't10k')):
    np.save('x_%s.npy' % s, idx(src + '/%s-images-idx3-ubyte.gz' % p))
    np.save('y_%s.npy' % s, idx(src + '/%s-labels-idx1-ubyte.gz' % p).astype(np.int64))
)PY");
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace troupe::testing
