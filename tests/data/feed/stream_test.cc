// --stream: the training inputs stay in the files (mapped .npy) and are converted as batches are
// cut. The same steps as in memory (bit for bit), and an epoch over a dataset several times larger
// than the memory limit of the `troupe train` process, its peak anonymous memory measured.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/data/numpy_fixture.h"
#include "tests/support/run_command.h"
#include "data/data_source.h"
#include "data/feed/streamed_inputs.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

using troupe::testing::run_command;
using troupe::testing::run_numpy;
using troupe::testing::TempDir;

TEST_CASE("stream: every byte converts to exactly float(x) / 255, the built-in dataset's value", "[data][stream]") {
  std::vector<uint8_t> bytes(256 * 3);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 256);  // every value, 3 times
  std::vector<float> got(bytes.size());
  bytes_to_unit_floats(bytes.data(), static_cast<int64_t>(bytes.size()), got.data());
  for (size_t i = 0; i < bytes.size(); ++i) {
    INFO("byte " << int(bytes[i]));
    REQUIRE(got[i] == static_cast<float>(bytes[i]) / 255.0f);
  }
}

TEST_CASE("stream: --stream trains the same steps as the data in memory, bit for bit", "[data][stream]") {
  TempDir dir;
  run_numpy(dir.path(), R"PY(
rng = np.random.default_rng(4)
c = rng.integers(0, 256, (4, 6, 5)).astype(np.float64)
y = rng.integers(0, 4, 3000); x = np.clip(c[y] + rng.normal(0, 40, (3000, 6, 5)), 0, 255).astype(np.uint8)
np.save('x.npy', x); np.save('y.npy', y); np.save('f.npy', rng.normal(0, 1, (3000, 3)).astype(np.float16))
)PY");
  TrainOptions o;
  o.data = dir.file("x.npy") + "," + dir.file("y.npy") + "," + dir.file("f.npy");
  o.hidden = {12};
  o.epochs = 4;
  o.batch_size = 50;
  o.val_fraction = 0.2;  // the split of a streamed set is a view, its evaluation part read whole
  auto memory = load_train_data(o);
  o.stream = true;
  auto streamed = load_train_data(o);
  REQUIRE(memory.ok());
  REQUIRE(streamed.ok());
  CHECK(streamed->train->stream != nullptr);
  CHECK(streamed->train->images.empty());
  CHECK(streamed->test->stream == nullptr);  // evaluated from memory
  CHECK(streamed->train->count == memory->train->count);
  CHECK(streamed->test->images == memory->test->images);
  CHECK(streamed->train->labels == memory->train->labels);
  CHECK(streamed->description.find("streamed from the files") != std::string::npos);
  std::vector<float> row(static_cast<size_t>(memory->train->features()));
  for (int64_t i : {int64_t{0}, int64_t{777}, memory->train->count - 1}) {
    streamed->train->stream->copy(i, row.data());
    CHECK(std::equal(row.begin(), row.end(), memory->train->images.begin() + i * memory->train->features()));
  }
  std::vector<float> a, b;
  o.stream = false;
  auto ra = train_with_trainer(o, *memory->train, *memory->test, {}, &a);
  o.stream = true;
  auto rb = train_with_trainer(o, *streamed->train, *streamed->test, {}, &b);
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(a == b);
  CHECK(ra->test_accuracy == rb->test_accuracy);
  CHECK(ra->test_accuracy > 0.8);
}

TEST_CASE("stream: token windows read from the files are the windows in memory, and train the same bit for bit",
          "[data][stream][windows]") {
  TempDir dir;
  run_numpy(dir.path(), R"PY(
(np.arange(0, 20001) * 7 % 97).astype(np.uint16).tofile('train.bin')
)PY");
  TrainOptions o;
  o.data = dir.file("train.bin");
  o.seq_len = 16;
  o.model = "gpt";
  o.trainer_args = {"layers=1", "heads=2", "dim=16"};
  o.batch_size = 8;
  o.epochs = 1;
  o.max_steps = 30;
  o.val_fraction = 0.1;  // a view of the streamed windows, read whole to evaluate
  auto memory = load_train_data(o);
  o.stream = true;
  auto streamed = load_train_data(o);
  REQUIRE(memory.ok());
  REQUIRE(streamed.ok());
  const Dataset& m = *memory->train;
  const Dataset& st = *streamed->train;
  CHECK(st.stream != nullptr);
  CHECK(st.images.empty());
  CHECK(st.labels.empty());  // the targets are read from the file too
  CHECK(streamed->test->stream == nullptr);
  CHECK(streamed->test->images == memory->test->images);
  CHECK(streamed->test->labels == memory->test->labels);
  CHECK(st.count == m.count);
  CHECK(st.classes == m.classes);
  CHECK(streamed->description.find("streamed from the files") != std::string::npos);
  std::vector<float> xa(16), xb(16);
  std::vector<int32_t> ya(16), yb(16);
  for (int64_t i : {int64_t{0}, int64_t{77}, m.count - 1}) {
    copy_example(m, i, xa.data(), ya.data(), nullptr);
    copy_example(st, i, xb.data(), yb.data(), nullptr);
    CHECK(xa == xb);
    CHECK(ya == yb);
  }
  std::vector<float> a, b;
  auto ra = train_with_trainer(o, m, *memory->test, {}, &a);
  auto rb = train_with_trainer(o, st, *streamed->test, {}, &b);
  INFO(ra.status().to_string() << " / " << rb.status().to_string());
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(a == b);
  CHECK(ra->test_loss == rb->test_loss);
}

// Joins a fresh memory cgroup (v1, as this machine mounts it) limited to `bytes`, when the test can
// make one (root and a writable memory controller); the path, or "" when it cannot.
std::string memory_cgroup(const std::string& name, int64_t bytes) {
  const std::string dir = "/sys/fs/cgroup/memory/" + name;
  if (::mkdir(dir.c_str(), 0755) != 0) return "";
  std::ofstream(dir + "/memory.limit_in_bytes") << bytes;
  std::ifstream check(dir + "/memory.limit_in_bytes");
  int64_t got = 0;
  check >> got;
  if (got <= 0 || got > bytes) {
    ::rmdir(dir.c_str());
    return "";
  }
  return dir;
}

// `troupe train ARGS`, its process alone in `cgroup` (none: ""), its RssAnon (memory that is not
// the page cache's) sampled every 20 ms until it ends by a loop outside the cgroup: the sampling's
// own forks must not be charged to the limit, or the OOM that an in-memory run meets could fail
// them instead of the train process. Its exit code and peak in KiB; its output in dir's out / err.
std::pair<int, int64_t> train_under_limit(const TempDir& dir, const std::string& cgroup, const std::string& args) {
  const std::string script = dir.file("run.sh");
  std::ofstream(script) << "#!/bin/sh\n"
                        << "sh -c '" << (cgroup.empty() ? "" : "echo $$ > " + cgroup + "/cgroup.procs && ")
                        << "exec " << troupe::testing::troupe_binary() << " train " << args << "' > "
                        << dir.file("out") << " 2> " << dir.file("err") << " &\n"
                        << "p=$!; peak=0\n"
                        << "while kill -0 $p 2>/dev/null; do\n"
                        << "  a=$(awk '/^RssAnon:/ {print $2}' /proc/$p/status 2>/dev/null)\n"
                        << "  [ -n \"$a\" ] && [ \"$a\" -gt \"$peak\" ] && peak=$a\n"
                        << "  sleep 0.02\n"
                        << "done\n"
                        << "wait $p; rc=$?; echo \"$rc $peak\" > " << dir.file("peak") << "\n";
  auto r = run_command("sh " + script, 600);
  INFO("the sampling script: " << r.both());
  REQUIRE(r.exit_code == 0);
  std::istringstream is(troupe::testing::slurp(dir.file("peak")));
  int rc = -1;
  int64_t peak_kb = -1;
  is >> rc >> peak_kb;
  return {rc, peak_kb};
}

TEST_CASE("stream: --stream goes through an epoch of a dataset several times its process's memory limit", "[data][stream]") {
  TempDir dir;
  // 1,000,000 examples of 784 u8 (784 MB: 3.1 GB once converted to f32); the class is whether
  // the first pixel is bright, so the model has something to learn. A small separate val split.
  run_numpy(dir.path(), R"PY(
rng = np.random.default_rng(8)
n = 1000000
x = np.lib.format.open_memmap('x_train.npy', mode='w+', dtype=np.uint8, shape=(n, 784))
for s in range(0, n, 100000):
    x[s:s+100000] = rng.integers(0, 256, (100000, 784), dtype=np.uint8)
x.flush()
np.save('y_train.npy', (x[:, 0] > 127).astype(np.int64)); del x
v = rng.integers(0, 256, (2000, 784), dtype=np.uint8)
np.save('x_val.npy', v); np.save('y_val.npy', (v[:, 0] > 127).astype(np.int64))
)PY");
  const int64_t limit = int64_t{256} << 20;  // a quarter of the file, a twelfth of its f32 copy
  const std::string name = "troupe-stream-test-" + std::to_string(::getpid());
  const std::string cgroup = memory_cgroup(name, limit);
  if (cgroup.empty())
    WARN("no memory cgroup could be made here (needs root and a writable /sys/fs/cgroup/memory): the epoch runs "
         "without the 256 MiB limit, its peak anonymous memory still measured and checked");
  auto run = [&](const std::string& flags) {
    return train_under_limit(dir, cgroup, "--data " + dir.path() + " " + flags +
                                              " --epochs 1 --batch-size 256 --hidden 16 --json --no-progress");
  };
  const auto [rc, peak_kb] = run("--stream");
  const std::string out = troupe::testing::slurp(dir.file("out")), err = troupe::testing::slurp(dir.file("err"));
  INFO("exit " << rc << ", peak RssAnon " << peak_kb << " KiB\n" << out << err);
  CHECK(rc == 0);
  CHECK(out.find("\"test_accuracy\"") != std::string::npos);
  CHECK(peak_kb > 0);
  CHECK(peak_kb * 1024 < limit);  // bounded: far below the 784 MB file, let alone its f32 copy
  WARN("--stream: an epoch over 1,000,000 examples (784 MB on disk) with a peak RssAnon of " << peak_kb / 1024
                                                                                               << " MiB: " << out);
  if (!cgroup.empty()) {
    // The limit is real: the same data read into memory first does not fit under it.
    const auto [rc_memory, peak_memory_kb] = run("");
    INFO("in memory: exit " << rc_memory << ", peak RssAnon " << peak_memory_kb << " KiB\n"
                            << troupe::testing::slurp(dir.file("err")));
    CHECK(rc_memory != 0);
    ::rmdir(cgroup.c_str());
  }
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST_CASE("stream: a token stream several times its process's memory limit trains with --stream --seq-len",
          "[data][stream][windows]") {
  TempDir dir;
  // 100,000,000 u16 token ids (200 MB on disk; 800 MB as windows in memory: 4 bytes an input, 4 a
  // target). A small separate val stream.
  run_numpy(dir.path(), R"PY(
rng = np.random.default_rng(9)
with open('train.bin', 'wb') as f:
    for _ in range(10):
        rng.integers(0, 256, 10000000, dtype=np.uint16).tofile(f)
rng.integers(0, 256, 20000, dtype=np.uint16).tofile('val.bin')
)PY");
  const int64_t limit = int64_t{256} << 20;
  const std::string cgroup = memory_cgroup("troupe-stream-windows-" + std::to_string(::getpid()), limit);
  if (cgroup.empty())
    WARN("no memory cgroup could be made here (needs root and a writable /sys/fs/cgroup/memory): the run goes "
         "without the 256 MiB limit, its peak anonymous memory still measured and checked");
  // 300 steps of windows drawn from the whole stream's seeded order (an epoch is 1.56 M windows).
  auto run = [&](const std::string& flags) {
    return train_under_limit(dir, cgroup, "--data " + dir.file("train.bin") + "," + dir.file("val.bin") +
                                              " --seq-len 64 --model gpt --trainer-arg layers=1 --trainer-arg heads=2 "
                                              "--trainer-arg dim=32 --batch-size 16 --max-steps 300 --epochs 1 "
                                              "--json --no-progress " + flags);
  };
  const auto [rc, peak_kb] = run("--stream");
  const std::string out = troupe::testing::slurp(dir.file("out")), err = troupe::testing::slurp(dir.file("err"));
  INFO("exit " << rc << ", peak RssAnon " << peak_kb << " KiB\n" << out << err);
  CHECK(rc == 0);
  CHECK(out.find("\"test_loss\"") != std::string::npos);
  CHECK(peak_kb > 0);
  CHECK(peak_kb * 1024 < limit);
  WARN("--stream --seq-len 64: 300 steps over 100,000,000 tokens (200 MB on disk, 800 MB as windows in memory) with "
       "a peak RssAnon of " << peak_kb / 1024 << " MiB");
  if (!cgroup.empty()) {
    const auto [rc_memory, peak_memory_kb] = run("");
    INFO("in memory: exit " << rc_memory << ", peak RssAnon " << peak_memory_kb << " KiB\n"
                            << troupe::testing::slurp(dir.file("err")));
    CHECK(rc_memory != 0);  // the limit is real: the windows in memory do not fit under it
    ::rmdir(cgroup.c_str());
  }
}

}  // namespace
}  // namespace troupe
