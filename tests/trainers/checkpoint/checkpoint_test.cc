// Checkpoints (trainers/checkpoint/): shard files round-trip and every damage to one is caught
// naming the file; the manifest catalog skips checkpoints whose files are missing or damaged and
// never sees shards without a manifest; optimizer state survives a save and a restore bit for bit;
// a job resumed from a checkpoint (one process, and 4 sync replicas) ends where an uninterrupted
// run ends.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "collectives/inproc_transport.h"
#include "gcs/events.h"
#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/ps/ps_fixture.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/checkpoint/shard_file.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sync/trainer_driver.h"

using namespace troupe;
using namespace troupe::checkpoint;
using troupe::testing::TempDir;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

ShardData sample_shard(size_t n = 10) {
  ShardData d;
  d.header.tag = "00112233445566778899aabbccddeeff";
  d.header.step = 120;
  d.header.epoch = 3;
  d.header.epoch_step = 7;
  d.header.shard = 1;
  d.header.shards = 2;
  d.header.total_floats = 2 * n;
  d.header.begin = n;
  d.header.end = 2 * n;
  d.params = troupe::testing::random_floats(n, 1);
  d.optimizer.name = "adam";
  d.optimizer.steps = 120;
  d.optimizer.vectors = {troupe::testing::random_floats(n, 2), troupe::testing::random_floats(n, 3)};
  return d;
}

// A checkpoint of one shard per step, `floats` parameters, recorded (or not) as job's manifest.
Manifest write_checkpoint_files(const std::string& dir, int64_t step, int shards = 2, size_t floats = 8) {
  Manifest m;
  m.step = step;
  m.dir = step_dir(dir, step);
  std::filesystem::create_directories(m.dir);
  for (int s = 0; s < shards; ++s) {
    ShardData d;
    d.header.step = step;
    d.header.epoch = 1;
    d.header.epoch_step = step;
    d.header.shard = s;
    d.header.shards = shards;
    d.header.total_floats = floats;
    size_t b, e;
    shard_range(floats, s, shards, &b, &e);
    d.header.begin = b;
    d.header.end = e;
    d.params.assign(e - b, static_cast<float>(step));
    d.optimizer.name = "sgd";
    d.optimizer.steps = step;
    d.optimizer.vectors = {std::vector<float>(e - b, 0.5f)};
    auto w = write_shard_file(shard_path(m.dir, s, shards), d);
    REQUIRE(w.ok());
    m.shards.push_back(*w);
  }
  return m;
}

TrainOptions small_job() {
  TrainOptions o;
  o.hidden = {16};
  o.epochs = 3;
  o.batch_size = 32;
  o.seed = 5;
  o.optimizer = "adam";
  o.lr = 0.01f;
  o.lr_schedule = "cosine";
  return o;
}

}  // namespace

TEST_CASE("optimizer state saved and restored continues bit for bit", "[checkpoint][optimizer]") {
  const size_t n = 257;
  for (const char* name : {"adam", "adamw", "sgd"}) {
    OptimizerOptions oo;
    oo.name = name;
    oo.lr = 0.01f;
    oo.weight_decay = 0.01f;
    auto a = make_optimizer(oo, n);
    REQUIRE(a.ok());
    std::vector<float> pa = troupe::testing::random_floats(n, 9);
    for (int i = 0; i < 5; ++i) (*a)->step(pa.data(), troupe::testing::random_floats(n, 100 + i).data());
    // Restored in two slices, as shards of a checkpoint are.
    auto b = make_optimizer(oo, n);
    REQUIRE(b.ok());
    REQUIRE((*b)->load_state((*a)->save_state(0, 100), 0).ok());
    REQUIRE((*b)->load_state((*a)->save_state(100, n), 100).ok());
    CHECK((*b)->steps() == 5);
    std::vector<float> pb = pa;
    for (int i = 5; i < 9; ++i) {
      const auto g = troupe::testing::random_floats(n, 100 + i);
      (*a)->step(pa.data(), g.data());
      (*b)->step(pb.data(), g.data());
    }
    INFO(name);
    CHECK(pa == pb);
  }
  OptimizerOptions sgd;
  auto s = make_optimizer(sgd, 4);
  OptimizerOptions adam;
  adam.name = "adam";
  auto a = make_optimizer(adam, 4);
  Status st = (*s)->load_state((*a)->save_state(0, 4), 0);
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("adam") && Catch::Contains("sgd"));
  CHECK((*a)->load_state((*a)->save_state(0, 4), 2).code() == Code::invalid_argument);  // does not fit
}

TEST_CASE("a checkpoint shard file round-trips and is written atomically", "[checkpoint]") {
  TempDir dir;
  ShardData d = sample_shard();
  d.extra = std::string("an async server's applied-data record\0with any bytes", 52);
  const std::string path = dir.file("shard-1-of-2.ckpt");
  auto w = write_shard_file(path, d);
  REQUIRE(w.ok());
  CHECK(w->bytes == std::filesystem::file_size(path));
  CHECK(w->checksum.size() == 16);
  CHECK(verify_shard_file(path, w->bytes, w->checksum).ok());
  auto r = read_shard_file(path);
  REQUIRE(r.ok());
  CHECK(r->header.tag == d.header.tag);
  CHECK(r->header.step == 120);
  CHECK(r->header.epoch == 3);
  CHECK(r->header.epoch_step == 7);
  CHECK(r->header.shard == 1);
  CHECK(r->header.shards == 2);
  CHECK(r->header.begin == 10);
  CHECK(r->header.end == 20);
  CHECK(r->params == d.params);
  CHECK(r->optimizer.name == "adam");
  CHECK(r->optimizer.steps == 120);
  CHECK(r->optimizer.vectors == d.optimizer.vectors);
  CHECK(r->extra == d.extra);
  // Only the final file is left: the temporary one was renamed.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
  CHECK(read_shard_file(dir.file("absent.ckpt")).status().code() == Code::not_found);
  CHECK(write_shard_file(dir.file("no-such-dir/x.ckpt"), d).status().code() == Code::io_error);
}

TEST_CASE("a shard file of format version 1 (no extra) is still read, and an oversized extra is refused",
          "[checkpoint]") {
  TempDir dir;
  const ShardData d = sample_shard(4);
  const std::string path = dir.file("shard-1-of-2.ckpt");
  REQUIRE(write_shard_file(path, d).ok());
  // Version 1 is version 2 without the extra's length: drop it, say version 1, checksum again.
  std::string v2 = read_bytes(path);
  std::string v1 = v2.substr(0, v2.size() - 16);
  const uint32_t one = 1;
  std::memcpy(&v1[8], &one, sizeof one);
  const uint64_t sum = std::stoull(xxh64_hex(v1.data(), v1.size()), nullptr, 16);
  v1.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  write_bytes(path, v1);
  auto r = read_shard_file(path);
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  CHECK(r->params == d.params);
  CHECK(r->optimizer.vectors == d.optimizer.vectors);
  CHECK(r->extra.empty());
  // A version from the future is named.
  const uint32_t three = 3;
  std::memcpy(&v1[8], &three, sizeof three);
  write_bytes(path, v1);
  CHECK(read_shard_file(path).status().message().find("format version 3") != std::string::npos);
  ShardData big = d;
  big.extra.assign(kMaxShardExtra + 1, 'x');
  CHECK(write_shard_file(path, big).status().code() == Code::invalid_argument);
}

TEST_CASE("every single-byte corruption and every truncation of a shard file is corrupt_data naming it",
          "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("shard-1-of-2.ckpt");
  ShardData d = sample_shard(6);
  d.extra = "record";  // its length and bytes are covered too
  auto w = write_shard_file(path, d);
  REQUIRE(w.ok());
  const std::string good = read_bytes(path);
  int missed = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    write_bytes(path, bad);
    auto r = read_shard_file(path);
    Status v = verify_shard_file(path, w->bytes, w->checksum);
    if (r.ok() || r.status().code() != Code::corrupt_data || r.status().message().find(path) == std::string::npos ||
        v.code() != Code::corrupt_data)
      ++missed;
  }
  CHECK(missed == 0);
  for (size_t len = 0; len < good.size(); ++len) {
    write_bytes(path, good.substr(0, len));
    auto r = read_shard_file(path);
    if (r.ok() || r.status().code() != Code::corrupt_data || r.status().message().find(path) == std::string::npos)
      ++missed;
    if (verify_shard_file(path, w->bytes, w->checksum).code() != Code::corrupt_data) ++missed;
  }
  CHECK(missed == 0);
  write_bytes(path, good + "x");  // too long
  CHECK(read_shard_file(path).status().code() == Code::corrupt_data);
  write_bytes(path, good);
  CHECK(read_shard_file(path).ok());
}

TEST_CASE("the catalog uses the newest checkpoint whose shards are all intact", "[checkpoint][catalog]") {
  TempDir dir;
  gcs::InMemoryStore store;
  const JobId job = JobId::random(), other = JobId::random();
  for (int64_t step : {10, 20, 30}) REQUIRE(write_manifest(store, job, write_checkpoint_files(dir.path(), step)).ok());
  REQUIRE(write_manifest(store, other, write_checkpoint_files(dir.file("other"), 50)).ok());

  auto latest = latest_good_checkpoint(store, job);
  REQUIRE(latest.ok());
  CHECK(latest->step == 30);

  SECTION("a crash after the shards of step 40 but before its manifest leaves step 30 the latest") {
    write_checkpoint_files(dir.path(), 40);
    auto l = latest_good_checkpoint(store, job);
    REQUIRE(l.ok());
    CHECK(l->step == 30);
  }
  SECTION("a damaged shard: the previous checkpoint is used, the damage reported") {
    const std::string victim = shard_path(step_dir(dir.path(), 30), 1, 2);
    std::string bytes = read_bytes(victim);
    bytes[bytes.size() / 2] ^= 1;
    write_bytes(victim, bytes);
    std::vector<std::string> skipped;
    auto l = latest_good_checkpoint(store, job, &skipped);
    REQUIRE(l.ok());
    CHECK(l->step == 20);
    REQUIRE(skipped.size() == 1);
    CHECK_THAT(skipped[0], Catch::Contains(victim) && Catch::Contains("step 30"));
    auto events = gcs::recent_events(store, 100);
    REQUIRE(events.ok());
    bool reported = false;
    for (const gcs::Event& e : *events) reported |= e.kind == "checkpoint_corrupt" && e.message.find(victim) != std::string::npos;
    CHECK(reported);
    // load_checkpoint of the damaged one fails naming the file too.
    auto state = load_checkpoint(from_record(*list_checkpoints(store, job)->begin()));
    CHECK(state.status().code() == Code::corrupt_data);
    CHECK_THAT(state.status().message(), Catch::Contains(victim));
  }
  SECTION("a missing shard and a truncated one: step 10 is used; none left: not_found") {
    std::filesystem::remove(shard_path(step_dir(dir.path(), 30), 0, 2));
    const std::string cut = shard_path(step_dir(dir.path(), 20), 0, 2);
    write_bytes(cut, read_bytes(cut).substr(0, 40));
    std::vector<std::string> skipped;
    auto l = latest_good_checkpoint(store, job, &skipped);
    REQUIRE(l.ok());
    CHECK(l->step == 10);
    CHECK(skipped.size() == 2);
    std::filesystem::remove_all(step_dir(dir.path(), 10));
    CHECK(latest_good_checkpoint(store, job).status().code() == Code::not_found);
  }
  SECTION("pruning keeps the newest K, files and records") {
    REQUIRE(prune_checkpoints(store, job, 2).ok());
    auto left = list_checkpoints(store, job);
    REQUIRE(left.ok());
    REQUIRE(left->size() == 2);
    CHECK((*left)[0].step == 30);
    CHECK((*left)[1].step == 20);
    CHECK_FALSE(std::filesystem::exists(step_dir(dir.path(), 10)));
    CHECK(std::filesystem::exists(step_dir(dir.path(), 20)));
    CHECK(list_checkpoints(store, other)->size() == 1);
  }
  SECTION("load_checkpoint assembles the shards") {
    auto state = load_checkpoint(from_record(*latest), 8);
    REQUIRE(state.ok());
    CHECK(state->step == 30);
    CHECK(state->params == std::vector<float>(8, 30.0f));
    CHECK(state->optimizer.vectors.size() == 1);
    CHECK(load_checkpoint(from_record(*latest), 9).status().code() == Code::invalid_argument);
  }
}

TEST_CASE("one process resumed from a checkpoint ends bit for bit where an uninterrupted run ends",
          "[checkpoint][resume]") {
  const Dataset train = blobs(640, 4, 3, 21), test = blobs(64, 4, 3, 22);
  const TrainOptions o = small_job();  // 20 steps an epoch, 60 in all
  std::vector<float> want;
  auto whole = train_with_trainer(o, train, test, {}, &want);
  REQUIRE(whole.ok());

  for (int64_t at : {25, 40}) {  // in the middle of epoch 2; at the end of epoch 2
    TempDir dir;
    std::atomic<bool> cancel{false};
    std::vector<Manifest> committed;
    Replica first;
    first.checkpoints.every = at;
    first.checkpoints.dir = dir.path();
    first.cancel = &cancel;
    first.checkpoints.commit = [&](const Manifest& m) {
      committed.push_back(m);
      cancel = true;  // the "crash": the run stops right after its first checkpoint
      return Status{};
    };
    auto stopped = train_replica(o, train, test, first);
    REQUIRE(stopped.status().code() == Code::unavailable);
    REQUIRE(committed.size() == 1);
    CHECK(committed[0].step == at);

    auto state = load_checkpoint(committed[0]);
    REQUIRE(state.ok());
    Replica resumed;
    resumed.resume = &*state;
    std::vector<float> got;
    auto rest = train_replica(o, train, test, resumed, {}, &got);
    REQUIRE(rest.ok());
    INFO("resumed at step " << at);
    CHECK(rest->steps == 60);
    CHECK(got == want);
    CHECK(rest->test_accuracy == whole->test_accuracy);
  }
}

TEST_CASE("4 sync replicas resumed from their sharded checkpoint match an uninterrupted run",
          "[checkpoint][resume][sync]") {
  const Dataset train = blobs(640, 4, 3, 31), test = blobs(64, 4, 3, 32);
  const TrainOptions o = small_job();
  auto run = [&](const std::function<void(int, Replica&)>& adjust, std::vector<std::vector<float>>* params) {
    auto transports = collectives::make_inproc_group(4);
    std::vector<Status> status(4);
    params->assign(4, {});
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r)
      threads.emplace_back([&, r] {
        collectives::Communicator comm(std::move(transports[static_cast<size_t>(r)]));
        Replica replica;
        replica.comm = &comm;
        replica.timeout = std::chrono::seconds(20);
        adjust(r, replica);
        auto result = train_replica(o, train, test, replica, {}, &(*params)[static_cast<size_t>(r)]);
        status[static_cast<size_t>(r)] = result.status();
      });
    for (auto& t : threads) t.join();
    return status;
  };
  std::vector<std::vector<float>> want;
  for (const Status& st : run([](int, Replica&) {}, &want)) REQUIRE(st.ok());

  TempDir dir;
  std::atomic<bool> cancel{false};
  std::vector<Manifest> committed;
  std::vector<std::vector<float>> ignored;
  auto stopped = run([&](int r, Replica& replica) {
    replica.checkpoints.every = 27;
    replica.checkpoints.dir = dir.path();
    replica.cancel = &cancel;
    if (r == 0) replica.checkpoints.commit = [&](const Manifest& m) {
      committed.push_back(m);
      cancel = true;
      return Status{};
    };
  }, &ignored);
  for (const Status& st : stopped) REQUIRE(st.code() == Code::unavailable);
  REQUIRE(committed.size() == 1);
  REQUIRE(committed[0].shards.size() == 4);  // sharded: one file per replica
  for (int r = 0; r < 4; ++r) CHECK(committed[0].shards[static_cast<size_t>(r)].path == shard_path(step_dir(dir.path(), 27), r, 4));

  auto state = load_checkpoint(committed[0]);
  REQUIRE(state.ok());
  CHECK(state->step == 27);
  CHECK(state->epoch == 2);
  CHECK(state->epoch_step == 7);
  std::vector<std::vector<float>> got;
  for (const Status& st : run([&](int, Replica& replica) { replica.resume = &*state; }, &got)) REQUIRE(st.ok());
  for (int r = 0; r < 4; ++r) CHECK(got[static_cast<size_t>(r)] == got[0]);
  const double diff = troupe::testing::relative_difference(got[0], want[0]);
  INFO("relative difference " << diff);
  CHECK(diff <= 1e-5);  // tests/jobs/ledger_feed_test.cc's tolerance; in one process it is 0
}

TEST_CASE("a central job (2 shards, 4 workers) resumed from its checkpoint matches an uninterrupted run",
          "[checkpoint][resume][ps][central]") {
  const Dataset train = blobs(640, 4, 3, 41), test = blobs(64, 4, 3, 42);
  const TrainOptions o = small_job();  // 20 steps an epoch
  ps::PsJobShape shape;
  shape.mode = ps::PsMode::central;
  shape.workers = 4;
  shape.shards = 2;
  shape.staleness = 0;
  shape.train_examples = train.count;
  const DataSpec data{train.features(), train.classes};

  // The uninterrupted run, checkpointing every 27 versions (= steps: every central update is global).
  TempDir dir;
  std::mutex mu;
  std::map<int64_t, std::vector<WrittenShard>> written;  // version -> shards, in shard order
  ps::PsJob first = ps::start_ps_job(o, data, shape, "job-1", [&](ps::ParameterShard& s) {
    ps::ShardCheckpointing c;
    c.every = 27;
    c.dir = dir.path();
    c.steps_per_epoch = 20;
    c.written = [&, index = s.index()](const WrittenShard& w, int64_t version) {
      std::lock_guard<std::mutex> lock(mu);
      auto& shards = written[version];
      shards.resize(2);
      shards[static_cast<size_t>(index)] = w;
      return Status{};
    };
    REQUIRE(s.enable_checkpoints(c).ok());
  });
  ps::WorkerRuns whole = ps::run_ps_workers(first, 4, o, train, test, true);
  for (const Status& st : whole.status) REQUIRE(st.ok());
  REQUIRE(written.size() == 2);  // versions 27 and 54
  Manifest m;
  m.step = 27;
  m.dir = step_dir(dir.path(), 27);
  m.shards = written[27];
  auto state = load_checkpoint(m);
  REQUIRE(state.ok());
  CHECK(state->epoch == 2);
  CHECK(state->epoch_step == 7);

  // Fresh servers restored to step 27, workers starting there.
  ps::PsJob second = ps::start_ps_job(o, data, shape, "job-1", [&](ps::ParameterShard& s) {
    REQUIRE(s.restore(*state).ok());
    CHECK(s.version() == 27);
  });
  ps::WorkerRuns resumed = ps::run_ps_workers(second, 4, o, train, test, true, 27);
  for (const Status& st : resumed.status) REQUIRE(st.ok());
  CHECK(resumed.reports[0].steps == 60 - 27);
  const double diff = troupe::testing::relative_difference(resumed.params[0], whole.params[0]);
  INFO("relative difference " << diff);
  CHECK(diff <= 1e-5);

  // Async shards checkpoint too (tests/trainers/ps/ps_restore_test.cc); a bad interval is refused.
  shape.mode = ps::PsMode::async;
  shape.staleness = -1;
  auto async_shard = ps::make_job_shard(o, data, shape, 0);
  REQUIRE(async_shard.ok());
  ps::ShardCheckpointing c;
  c.every = 0;
  c.dir = dir.path();
  CHECK((*async_shard)->enable_checkpoints(c).code() == Code::invalid_argument);
  c.every = 10;
  CHECK((*async_shard)->enable_checkpoints(c).ok());
}

TEST_CASE("load_range reads a stage's own shard, load_ranges any ranges of the others, and both name damage", "[checkpoint][pipeline]") {
  // Three shards of uneven ranges (a pipeline's stages): parameter i is i, its optimizer state 100 + i.
  TempDir dir;
  const std::vector<size_t> cuts = {0, 5, 12, 20};
  Manifest m;
  m.step = 40;
  m.dir = step_dir(dir.path(), 40);
  std::filesystem::create_directories(m.dir);
  for (int s = 0; s < 3; ++s) {
    ShardData d;
    d.header.step = 40;
    d.header.epoch = 2;
    d.header.epoch_step = 9;
    d.header.shard = s;
    d.header.shards = 3;
    d.header.total_floats = 20;
    d.header.begin = cuts[s];
    d.header.end = cuts[s + 1];
    d.optimizer.name = "sgd";
    d.optimizer.steps = 40;
    d.optimizer.vectors.resize(1);
    for (size_t i = cuts[s]; i < cuts[s + 1]; ++i) {
      d.params.push_back(static_cast<float>(i));
      d.optimizer.vectors[0].push_back(100.0f + i);
    }
    auto w = write_shard_file(shard_path(m.dir, s, 3), d);
    REQUIRE(w.ok());
    m.shards.push_back(*w);
  }
  auto expect_range = [](const TrainingState& st, size_t b, size_t e) {
    REQUIRE(st.params.size() == e - b);
    REQUIRE(st.optimizer.vectors.size() == 1);
    for (size_t i = b; i < e; ++i) {
      CHECK(st.params[i - b] == static_cast<float>(i));
      CHECK(st.optimizer.vectors[0][i - b] == 100.0f + i);
    }
    CHECK(st.step == 40);
    CHECK(st.epoch == 2);
    CHECK(st.epoch_step == 9);
    CHECK(st.optimizer.steps == 40);
  };
  SECTION("a stage's own range is read from its shard alone") {
    const std::string other = shard_path(m.dir, 0, 3);
    std::string bytes = read_bytes(other);
    bytes[bytes.size() / 2] ^= 1;  // damage another stage's shard: stage 1 never reads it
    write_bytes(other, bytes);
    auto st = load_range(m, 20, 5, 12, 1);
    REQUIRE(st.ok());
    expect_range(*st, 5, 12);
    auto bad = load_range(m, 20, 0, 5, 0);  // stage 0's own shard is the damaged one
    CHECK(bad.status().code() == Code::corrupt_data);
    CHECK_THAT(bad.status().message(), Catch::Contains(other));
  }
  SECTION("another layout (a range across shards, or a wrong hint) is cut from the shards, read one at a time") {
    auto across = load_range(m, 20, 3, 15, 1);
    REQUIRE(across.ok());
    expect_range(*across, 3, 15);
    auto wrong_hint = load_range(m, 20, 12, 20, 0);
    REQUIRE(wrong_hint.ok());
    expect_range(*wrong_hint, 12, 20);
    auto no_hint = load_range(m, 20, 0, 20, -1);
    REQUIRE(no_hint.ok());
    expect_range(*no_hint, 0, 20);
  }
  SECTION("load_ranges: a sharded replica's scattered chunks, other ranges for the optimizer, or the step alone") {
    auto chunks = load_ranges(m, 20, {{1, 3}, {4, 7}, {11, 19}});  // across every shard's edges
    REQUIRE(chunks.ok());
    const std::vector<size_t> want = {1, 2, 4, 5, 6, 11, 12, 13, 14, 15, 16, 17, 18};
    REQUIRE(chunks->params.size() == want.size());
    REQUIRE(chunks->optimizer.vectors.size() == 1);
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(chunks->params[i] == static_cast<float>(want[i]));
      CHECK(chunks->optimizer.vectors[0][i] == 100.0f + want[i]);
    }
    CHECK(chunks->step == 40);
    CHECK(chunks->epoch_step == 9);
    auto split = load_ranges(m, 20, {{0, 20}}, {{6, 8}});  // whole parameters, a chunk of the state
    REQUIRE(split.ok());
    CHECK(split->params.size() == 20);
    CHECK(split->params[19] == 19.0f);
    REQUIRE(split->optimizer.vectors[0].size() == 2);
    CHECK(split->optimizer.vectors[0][1] == 107.0f);
    auto step = load_ranges(m, 0, {}, {});  // the step: every shard verified, nothing held
    REQUIRE(step.ok());
    CHECK(step->step == 40);
    CHECK(step->epoch == 2);
    CHECK(step->params.empty());
    CHECK(load_ranges(m, 20, {{4, 7}, {1, 3}}).status().code() == Code::invalid_argument);  // out of order
    CHECK(load_ranges(m, 20, {{4, 7}, {6, 9}}).status().code() == Code::invalid_argument);  // overlapping
    const std::string last = shard_path(m.dir, 2, 3);
    std::string bytes = read_bytes(last);
    bytes[bytes.size() / 3] ^= 4;
    write_bytes(last, bytes);
    auto damaged = load_ranges(m, 0, {}, {});  // even a shard none of the ranges needs is verified
    CHECK(damaged.status().code() == Code::corrupt_data);
    CHECK_THAT(damaged.status().message(), Catch::Contains(last));
  }
  SECTION("read_position: the step and epoch from the first shard's header, nothing else read or held") {
    auto at = read_position(m);
    REQUIRE(at.ok());
    CHECK(at->step == 40);
    CHECK(at->epoch == 2);
    CHECK(at->epoch_step == 9);
    CHECK(at->params.empty());
    // The payload is not read: a damaged byte past the header goes unnoticed here (the replica's
    // load_ranges verifies every shard it reads), a damaged header does not.
    const std::string first = shard_path(m.dir, 0, 3);
    std::string bytes = read_bytes(first);
    bytes[bytes.size() - 20] ^= 4;
    write_bytes(first, bytes);
    CHECK(read_position(m).ok());
    CHECK(load_ranges(m, 20, {{0, 20}}).status().code() == Code::corrupt_data);
    bytes[2] ^= 1;  // the magic
    write_bytes(first, bytes);
    auto bad = read_position(m);
    CHECK(bad.status().code() == Code::corrupt_data);
    CHECK_THAT(bad.status().message(), Catch::Contains(first));
    write_bytes(first, bytes.substr(0, 30));
    CHECK_THAT(read_position(m).status().message(), Catch::Contains("truncated to 30 bytes"));
    Manifest other = m;
    other.step = 41;
    bytes[2] ^= 1;
    write_bytes(first, bytes);
    CHECK_THAT(read_position(other).status().message(), Catch::Contains("says step 40"));
  }
  SECTION("a range outside the model, or another model's size, is refused") {
    CHECK(load_range(m, 20, 15, 25, 2).status().code() == Code::invalid_argument);
    auto other_model = load_range(m, 30, 12, 20, 2);
    CHECK(other_model.status().code() == Code::invalid_argument);
    CHECK_THAT(other_model.status().message(), Catch::Contains("20 parameters"));
  }
}
