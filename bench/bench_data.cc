// bench_data: reading the user's data (data/ readers), one thread, from the page cache, beside
// NumPy doing the same on the same files in the same invocation (bench/peers/numpy_data.py):
//
//   npy batches:    the training images as an .npy, memory-mapped; random batches of 128 rows
//                   gathered and converted to f32 / 255 (what a feed does per step); and again with
//                   the conversion built for SSE2 only (npy_batches_sse2: what the dispatch gains);
//   token windows:  a 50M-token u16 stream (.npy), mapped; random windows of seq-len + 1 ids to i32;
//   csv:            the training set as CSV (60,000 rows x 785 columns): read and parsed whole;
//   png shards:     WebDataset tar shards of the training images as PNG: read and decoded whole;
//   load + convert: load_train_data of the four .npy files (train and test: the trainers' Datasets).
//
//   build/bin/bench_data [--dir DIR] [--runs 3]
//
// DIR is filled by NumPy and Pillow the first time (about 30 s). MB/s counts the bytes read from
// the source (u8 pixels, u16 tokens, the CSV or tar files); medians of --runs.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "data/dataset_spec.h"
#include "data/readers/csv_reader.h"
#include "data/readers/npy_reader.h"
#include "data/readers/webdataset_reader.h"
#include "kernels/cpu/blas_info.h"
#include "data/data_source.h"
#include "data/feed/streamed_inputs.h"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

// bytes_to_unit_floats as the baseline build compiles it (no wider vectors): the dispatch's gain.
__attribute__((noinline)) void baseline_unit_floats(const uint8_t* p, int64_t n, float* out) {
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(p[k]) / 255.0f;
}

constexpr int kBatch = 128;

struct Figure {
  double mb_per_s = 0, examples_per_s = 0;
};

template <class F>
double median_seconds(int runs, F&& body) {
  std::vector<double> s;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = bench::Clock::now();
    body();
    s.push_back(bench::seconds_since(t0));
  }
  return bench::median(s);
}

bool make_fixtures(const std::string& dir) {
  if (fs::exists(dir + "/done")) return true;
  fs::create_directories(dir);
  const std::string script = dir + "/make.py";
  FILE* f = std::fopen(script.c_str(), "w");
  if (!f) return false;
  std::fprintf(f, R"PY(
import gzip, io, os, tarfile
import numpy as np
from PIL import Image
os.chdir(%s)
def idx(path):
    with gzip.open(path) as f: b = f.read()
    nd = b[3]; dims = [int.from_bytes(b[4+4*i:8+4*i], 'big') for i in range(nd)]
    return np.frombuffer(b[4+4*nd:], dtype=np.uint8).reshape(dims)
x = idx('%s/train-images-idx3-ubyte.gz'); y = idx('%s/train-labels-idx1-ubyte.gz')
np.save('x_train.npy', x); np.save('y_train.npy', y.astype(np.int64))
np.save('x_test.npy', idx('%s/t10k-images-idx3-ubyte.gz')); np.save('y_test.npy', idx('%s/t10k-labels-idx1-ubyte.gz').astype(np.int64))
np.save('tokens.npy', np.random.default_rng(1).integers(0, 50257, 50_000_000).astype('<u2'))
names = 'label,' + ','.join('p%%d' %% i for i in range(784))
np.savetxt('train.csv', np.concatenate([y[:, None], x.reshape(len(x), -1)], 1), fmt='%%d', delimiter=',', header=names, comments='')
for s in range(6):
    with tarfile.open('train-%%06d.tar' %% s, 'w') as t:
        for i in range(s * 10000, (s + 1) * 10000):
            b = io.BytesIO(); Image.fromarray(x[i]).save(b, format='PNG'); png = b.getvalue()
            for ext, data in (('png', png), ('cls', str(int(y[i])).encode())):
                info = tarfile.TarInfo('%%06d.%%s' %% (i, ext)); info.size = len(data); t.addfile(info, io.BytesIO(data))
open('done', 'w').write('ok')
)PY", ("'" + dir + "'").c_str(), TROUPE_DEFAULT_DATASET_DIR, TROUPE_DEFAULT_DATASET_DIR,
               TROUPE_DEFAULT_DATASET_DIR, TROUPE_DEFAULT_DATASET_DIR);
  std::fclose(f);
  std::fprintf(stderr, "bench_data: writing the fixtures into %s (NumPy, Pillow)...\n", dir.c_str());
  return std::system(("/usr/bin/python3 " + script).c_str()) == 0;
}

size_t file_size(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::reexec_for_blas(argv);
  CLI::App app{"reading the user's data, beside NumPy"};
  std::string dir = (fs::temp_directory_path() / "troupe-bench-data").string();
  int runs = 3, batches = 2000, seq_len = 256;
  app.add_option("--dir", dir, "Fixture folder (made the first time)")->capture_default_str();
  app.add_option("--runs", runs, "Runs per figure (medians)")->capture_default_str();
  app.add_option("--batches", batches, "Random batches of 128 per run")->capture_default_str();
  app.add_option("--seq-len", seq_len, "Token window length")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  if (!make_fixtures(dir)) {
    std::fprintf(stderr, "bench_data: could not write the fixtures (python3-numpy, python3-pil)\n");
    return 1;
  }
  std::printf("# %s\n# %s, one thread, files in the page cache, medians of %d\n", bench::command_line(argc, argv).c_str(),
              bench::cpu_model().c_str(), runs);
  std::mt19937_64 rng(1);
  std::vector<std::pair<std::string, Figure>> ours;

  double vectors_gain = 0;  // npy batches: the dispatched conversion against the SSE2 build of it
  {  // npy batches
    auto x = data::read_npy(dir + "/x_train.npy");
    if (!x.ok()) return std::fprintf(stderr, "%s\n", x.status().to_string().c_str()), 1;
    const int64_t n = x->count(), row = x->example_elements();
    std::vector<int64_t> idx(static_cast<size_t>(batches) * kBatch);
    for (auto& i : idx) i = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    std::vector<float> batch(static_cast<size_t>(kBatch * row));
    volatile float sink = 0;
    auto gather = [&](void (*convert)(const uint8_t*, int64_t, float*)) {
      return median_seconds(runs, [&] {
        for (int b = 0; b < batches; ++b) {
          float* out = batch.data();
          for (int r = 0; r < kBatch; ++r) {
            convert(x->example(idx[static_cast<size_t>(b) * kBatch + r]), row, out);
            out += row;
          }
          sink = sink + batch[0];
        }
      });
    };
    // As the feeds convert u8 inputs (data/feed/streamed_inputs.h: the widest vectors the CPU has),
    // and beside it the same loop built for the baseline x86-64 (SSE2) alone.
    const double s = gather(bytes_to_unit_floats);
    const double base = gather(baseline_unit_floats);
    const double ex = static_cast<double>(batches) * kBatch;
    ours.push_back({"npy_batches", {ex * row / s / 1e6, ex / s}});
    ours.push_back({"npy_batches_sse2", {ex * row / base / 1e6, ex / base}});
    vectors_gain = base / s;
  }
  {  // token windows
    auto t = data::read_npy(dir + "/tokens.npy");
    if (!t.ok()) return std::fprintf(stderr, "%s\n", t.status().to_string().c_str()), 1;
    const int64_t n = t->count();
    std::vector<int64_t> starts(static_cast<size_t>(batches) * kBatch);
    for (auto& s : starts) s = static_cast<int64_t>(rng() % static_cast<uint64_t>(n - seq_len - 1));
    std::vector<int32_t> w(static_cast<size_t>(kBatch) * (seq_len + 1));
    const auto* ids = reinterpret_cast<const uint16_t*>(t->bytes);
    volatile int32_t sink = 0;
    const double s = median_seconds(runs, [&] {
      for (int b = 0; b < batches; ++b) {
        int32_t* out = w.data();
        for (int r = 0; r < kBatch; ++r) {
          const uint16_t* p = ids + starts[static_cast<size_t>(b) * kBatch + r];
          for (int k = 0; k <= seq_len; ++k) *out++ = p[k];
        }
        sink = sink + w[0];
      }
    });
    const double ex = static_cast<double>(batches) * kBatch;
    ours.push_back({"token_windows", {ex * (seq_len + 1) * 2 / s / 1e6, ex / s}});
  }
  {  // csv
    int64_t rows = 0;
    const double s = median_seconds(runs, [&] {
      auto t = data::read_csv(dir + "/train.csv");
      rows = t.ok() ? t->count() : 0;
    });
    ours.push_back({"csv", {file_size(dir + "/train.csv") / s / 1e6, rows / s}});
  }
  {  // png shards
    std::vector<std::string> shards;
    size_t bytes = 0;
    for (int i = 0; i < 6; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "/train-%06d.tar", i);
      shards.push_back(dir + name);
      bytes += file_size(dir + name);
    }
    int64_t n = 0;
    const double s = median_seconds(runs, [&] {
      auto t = data::read_webdataset(shards);
      n = t.ok() ? t->count() : 0;
    });
    ours.push_back({"png_shards", {bytes / s / 1e6, n / s}});
  }
  {  // load + convert
    DataOptions o;
    o.data = dir + "/x_train.npy," + dir + "/y_train.npy," + dir + "/x_test.npy," + dir + "/y_test.npy";
    const double s = median_seconds(runs, [&] { (void)load_train_data(o); });
    ours.push_back({"npy_load_convert", {70000.0 * 784 / s / 1e6, 70000 / s}});
  }

  // NumPy on the same files, same batches and windows counts.
  const std::string cmd = "/usr/bin/python3 " TROUPE_SOURCE_DIR "/bench/peers/numpy_data.py --dir " + dir +
                          " --batches " + std::to_string(batches) + " --seq-len " + std::to_string(seq_len) +
                          " --runs " + std::to_string(runs) + " 2>/dev/null";
  nlohmann::json peer;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    std::string out;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    if (::pclose(p) == 0) peer = nlohmann::json::parse(out, nullptr, false);
  }
  std::printf("%-18s %12s %14s %12s %14s %10s\n", "read", "troupe MB/s", "troupe ex/s", "NumPy MB/s", "NumPy ex/s",
              "troupe/NumPy");
  for (const auto& [name, f] : ours) {
    double np_mb = 0, np_ex = 0;
    if (peer.is_object() && peer.contains(name)) {
      np_mb = peer[name].value("mb_per_s", 0.0);
      np_ex = peer[name].value("examples_per_s", 0.0);
    }
    std::printf("%-18s %12.0f %14.0f %12s %14s %10s\n", name.c_str(), f.mb_per_s, f.examples_per_s,
                np_mb > 0 ? std::to_string(static_cast<int64_t>(np_mb)).c_str() : "-",
                np_ex > 0 ? std::to_string(static_cast<int64_t>(np_ex)).c_str() : "-",
                np_mb > 0 ? (std::to_string(f.mb_per_s / np_mb).substr(0, 5) + "x").c_str() : "-");
  }
  std::printf("# npy batches: the conversion at this CPU's widest vectors / its SSE2 build = %.2fx\n", vectors_gain);
  return 0;
}
