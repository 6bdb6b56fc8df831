// Sharded data parallelism (`--shard optimizer|gradients`, trainers/sharded/): the chunks a rank owns
// cover every bucket exactly once; the page buffer gives pages back; sharded replicas of the mlp end
// where plain sync replicas end (2 and 4 replicas, f32 and bf16, clipping and matrix-only decay, f16
// loss scaling); their checkpoints keep the unsharded layout, so a sharded job resumes on fewer
// replicas, or unsharded, and ends where the uninterrupted run ends — each replica reading the whole
// checkpoint or only its own ranges; a rank that leaves the group makes the others fail naming it;
// --save under --shard parameters writes the model layer by layer.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <thread>

#include "data/safetensors.h"
#include "tests/core/temp_dir.h"
#include "tests/support/numeric_test_util.h"
#include "tests/trainers/blobs.h"
#include "tests/trainers/sync/replica_threads.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/sharded/page_buffer.h"
#include "trainers/sharded/sharded_state.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using troupe::testing::relative_difference;
using troupe::testing::run_replica_threads;
using troupe::testing::run_stage;
using troupe::testing::TempDir;

namespace {

TrainOptions sharded_job() {
  TrainOptions o;
  o.hidden = {48, 24};
  o.batch_size = 48;  // divides among 2, 3 and 4 replicas
  o.epochs = 1;
  o.max_steps = 100;
  o.optimizer = "adamw";
  o.lr = 0.01f;
  o.weight_decay = 0.05f;
  o.weight_decay_params = "matrices";
  o.clip_grad_norm = 0.5f;  // clips most steps: the norm must be the whole model's
  o.seed = 5;
  return o;
}

// `replicas` replicas with --shard `stage` stopped right after their first checkpoint (every
// `every` steps, into `dir`) is committed: that checkpoint, read back whole.
// The first checkpoint of a job of `replicas` (stopped right after it): its manifest, and loaded whole.
struct FirstCheckpoint {
  checkpoint::Manifest manifest;
  checkpoint::TrainingState state;
};
FirstCheckpoint first_checkpoint(int replicas, const TrainOptions& o, const Dataset& train, const Dataset& test,
                                 ShardStage stage, size_t bucket_bytes, int64_t every, const std::string& dir) {
  std::atomic<bool> cancel{false};
  std::vector<checkpoint::Manifest> committed;
  auto stopped = run_replica_threads(replicas, o, train, test, [&](int rank, Replica& r, TrainOptions&) {
    r.bucket_bytes = bucket_bytes;
    r.shard = stage;
    r.checkpoints.every = every;
    r.checkpoints.dir = dir;
    r.cancel = &cancel;
    if (rank == 0) r.checkpoints.commit = [&](const checkpoint::Manifest& m) {
      committed.push_back(m);
      cancel = true;
      return Status{};
    };
  });
  for (const Status& st : stopped.status) REQUIRE(st.code() == Code::unavailable);
  REQUIRE(committed.size() == 1);
  auto state = checkpoint::load_checkpoint(committed[0]);
  REQUIRE(state.ok());
  return {committed[0], *state};
}

// How a resumed replica reads the checkpoint: whole (Replica::resume), or as a sharded job's
// replica does, its own ranges only (Replica::resume_ranges, `resume` holding only the step).
void resume_from(const FirstCheckpoint& c, bool ranges, const checkpoint::TrainingState& step_only, Replica& r) {
  if (!ranges) {
    r.resume = &c.state;
    return;
  }
  r.resume = &step_only;
  r.resume_ranges = [m = c.manifest](size_t total, const std::vector<checkpoint::Range>& params,
                                     const std::vector<checkpoint::Range>& optimizer) {
    return checkpoint::load_ranges(m, total, params, optimizer);
  };
}

checkpoint::TrainingState step_of(const FirstCheckpoint& c) {
  auto s = checkpoint::load_ranges(c.manifest, 0, {}, {});
  REQUIRE(s.ok());
  CHECK(s->step == c.state.step);
  CHECK(s->params.empty());
  return *s;
}

}  // namespace

TEST_CASE("sharded: every bucket's floats are owned by exactly one rank", "[sharded]") {
  const std::vector<GradBucket> buckets = {{20, 10, 2, 2}, {3, 17, 1, 1}, {0, 3, 0, 0}};
  for (int size : {1, 2, 3, 4, 5}) {
    std::vector<int> owners(30, 0);
    for (int r = 0; r < size; ++r) {
      const auto chunks = plan_owned_chunks(buckets, r, size);
      REQUIRE(chunks.size() == buckets.size());
      for (size_t b = 0; b < chunks.size(); ++b) {
        CHECK(chunks[b].chunk * static_cast<size_t>(size) >= buckets[b].count);
        CHECK(chunks[b].begin >= buckets[b].offset);
        CHECK(chunks[b].end <= buckets[b].offset + buckets[b].count);
        for (size_t i = chunks[b].begin; i < chunks[b].end; ++i) ++owners[i];
      }
    }
    for (int o : owners) CHECK(o == 1);
  }
}

TEST_CASE("sharded: a page buffer's released range reads zero, keeps its edges' neighbours and leaves memory",
          "[sharded]") {
  const size_t n = 1 << 20;  // 4 MiB
  auto made = PageBuffer::create(n);
  REQUIRE(made.ok());
  PageBuffer b = std::move(*made);
  CHECK(b.resident_bytes() == 0);  // nothing touched yet
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<float>(i % 1000) + 1.0f;
  CHECK(b.resident_bytes() >= n * sizeof(float));
  b.release(1001, n - 777);  // neither edge on a page boundary
  CHECK(b.resident_bytes() <= 2 * 4096 + 2 * 4096);  // the edges' pages (and what 777 floats span)
  bool zero = true, kept = true;
  for (size_t i = 1001; i < n - 777; ++i) zero = zero && b.data()[i] == 0.0f;
  for (size_t i = 0; i < 1001; ++i) kept = kept && b.data()[i] == static_cast<float>(i % 1000) + 1.0f;
  for (size_t i = n - 777; i < n; ++i) kept = kept && b.data()[i] == static_cast<float>(i % 1000) + 1.0f;
  CHECK(zero);
  CHECK(kept);
  b.data()[n / 2] = 7.0f;  // written again: a page of its own again
  CHECK(b.data()[n / 2 + 1] == 0.0f);
  CHECK(b.resident_bytes() >= 4096);
}

TEST_CASE("sharded: optimizer and gradient sharding end where plain sync replicas end (mlp)", "[sharded][equivalence]") {
  const Dataset train = blobs(48 * 100, 4, 6, 21), test = blobs(96, 4, 6, 22);
  const int replicas = GENERATE(2, 4);
  const DType precision = GENERATE(DType::f32, DType::bf16);
  TrainOptions o = sharded_job();
  o.precision = precision;
  const size_t bucket_bytes = 2048;  // several buckets, the w0 block one of its own
  auto plain = run_stage(replicas, o, train, test, ShardStage::none, bucket_bytes);
  INFO(plain.errors());
  REQUIRE(plain.all_ok());
  for (ShardStage stage : {ShardStage::optimizer, ShardStage::gradients}) {
    auto sharded = run_stage(replicas, o, train, test, stage, bucket_bytes);
    INFO(replicas << " replicas, " << dtype_name(precision) << ", --shard " << shard_stage_name(stage) << "\n"
                  << sharded.errors());
    REQUIRE(sharded.all_ok());
    CHECK(sharded.identical());
    const double diff = relative_difference(sharded.params[0], plain.params[0]);
    INFO("relative difference to plain sync after 100 steps: " << diff);
    CHECK(diff < 1e-5);
    CHECK(sharded.results[0].test_accuracy == Approx(plain.results[0].test_accuracy).margin(0.011));
    CHECK(sharded.results[0].history.back().train_loss == Approx(plain.results[0].history.back().train_loss).epsilon(1e-4));
    // Each replica kept the optimizer state of its own chunks only: 8 bytes (adamw) x its share.
    int64_t optimizer_bytes = 0;
    for (const ShardStats& m : sharded.memory) optimizer_bytes += m.optimizer;
    CHECK(optimizer_bytes == static_cast<int64_t>(8 * sharded.params[0].size()));
    for (const ShardStats& m : sharded.memory) CHECK(m.optimizer <= 8 * static_cast<int64_t>(sharded.params[0].size()) / replicas + 8 * 64);
  }
}

TEST_CASE("sharded: f16 replicas skip the same overflowing steps as plain sync and end beside it",
          "[sharded][equivalence]") {
  const Dataset train = blobs(48 * 100, 4, 6, 23), test = blobs(96, 4, 6, 24);
  TrainOptions o = sharded_job();
  o.precision = DType::f16;
  o.max_steps = 60;
  o.loss_scale = 16777216.0f;  // 2^24: the first steps overflow f16; every rank must skip them alike
  auto plain = run_stage(3, o, train, test, ShardStage::none, 4096);
  INFO(plain.errors());
  REQUIRE(plain.all_ok());
  for (ShardStage stage : {ShardStage::gradients, ShardStage::parameters}) {  // parameters: the layers scale dout
    auto sharded = run_stage(3, o, train, test, stage, 4096);
    INFO("--shard " << shard_stage_name(stage) << "\n" << sharded.errors());
    REQUIRE(sharded.all_ok());
    CHECK(sharded.identical());
    // f16 rounds activations to 2^-11: the reduction order's last-bit differences (1e-7 in f32, as
    // between plain sync and one process) flip some roundings, so the runs part by more than f32's.
    CHECK(relative_difference(sharded.params[0], plain.params[0]) < 1e-3);
    CHECK(plain.results[0].overflow_steps > 0);
    CHECK(sharded.results[0].overflow_steps == plain.results[0].overflow_steps);
    CHECK(sharded.results[0].loss_scale == plain.results[0].loss_scale);
  }
}

TEST_CASE("sharded: a checkpoint of 4 sharded replicas resumes on 3 sharded or 2 plain replicas where the "
          "uninterrupted run ends", "[sharded][checkpoint]") {
  const Dataset train = blobs(48 * 100, 4, 6, 25), test = blobs(96, 4, 6, 26);
  const TrainOptions o = sharded_job();
  auto whole = run_stage(4, o, train, test, ShardStage::gradients, 2048);
  INFO(whole.errors());
  REQUIRE(whole.all_ok());

  TempDir dir;
  const FirstCheckpoint checkpoint = first_checkpoint(4, o, train, test, ShardStage::gradients, 2048, 40, dir.path());
  const checkpoint::TrainingState* state = &checkpoint.state;
  const checkpoint::TrainingState step_only = step_of(checkpoint);
  CHECK(state->step == 40);
  CHECK(state->optimizer.name == "adamw");
  CHECK(state->optimizer.steps == 40);
  REQUIRE(state->optimizer.vectors.size() == 2);
  bool moments = false;  // the second moments were assembled from every rank's chunks: none left zero
  for (float v : state->optimizer.vectors[1]) moments = moments || v != 0.0f;
  CHECK(moments);

  struct Way { int replicas; ShardStage stage; bool ranges; };
  for (Way way : {Way{3, ShardStage::gradients, true}, Way{2, ShardStage::none, false},
                  Way{3, ShardStage::optimizer, false}, Way{3, ShardStage::optimizer, true}}) {
    auto resumed = run_replica_threads(way.replicas, o, train, test, [&](int, Replica& r, TrainOptions&) {
      r.bucket_bytes = 2048;
      r.shard = way.stage;
      resume_from(checkpoint, way.ranges, step_only, r);
    });
    INFO("resumed on " << way.replicas << " replicas, --shard " << shard_stage_name(way.stage)
                       << (way.ranges ? ", each reading its ranges" : ", the checkpoint whole") << "\n"
                       << resumed.errors());
    REQUIRE(resumed.all_ok());
    const double diff = relative_difference(resumed.params[0], whole.params[0]);
    INFO("relative difference to the uninterrupted run: " << diff);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("sharded: a replica that leaves makes the others fail naming it, and bad combinations are refused",
          "[sharded][errors]") {
  const Dataset train = blobs(48 * 100, 4, 6, 27), test = blobs(96, 4, 6, 28);
  TrainOptions o = sharded_job();
  auto run = run_replica_threads(3, o, train, test, [](int rank, Replica& r, TrainOptions& mine) {
    r.shard = ShardStage::gradients;
    r.bucket_bytes = 2048;
    r.timeout = std::chrono::seconds(5);
    if (rank == 1) mine.max_steps = 7;  // leaves while the others go on
  });
  for (int r : {0, 2}) {
    INFO(run.status[r].to_string());
    REQUIRE_FALSE(run.status[r].ok());
    CHECK(run.status[r].message().find("rank 1") != std::string::npos);
    CHECK(run.status[r].message().find("step 8") != std::string::npos);
  }
  o.accumulate = 2;
  auto refused = run_stage(2, o, train, test, ShardStage::gradients);
  CHECK(refused.status[0].code() == Code::invalid_argument);
  CHECK(refused.status[0].message().find("--shard gradients with --accumulate 2") != std::string::npos);
}

TEST_CASE("sharded: --shard parameters (layer by layer) ends where plain sync ends, f32 and bf16",
          "[sharded][equivalence][parameters]") {
  const Dataset train = blobs(48 * 100, 4, 6, 31), test = blobs(96, 4, 6, 32);
  TrainOptions o = sharded_job();  // 3 layers
  const int replicas = GENERATE(2, 4);
  o.precision = GENERATE(DType::f32, DType::bf16);  // bf16: the layers round as the mlp's whole step does
  INFO(dtype_name(o.precision));
  const auto [plain, sharded] =
      troupe::testing::check_sharded_matches_plain(replicas, o, train, test, ShardStage::parameters, 2048);
  if (o.precision == DType::f32) {
    CHECK(sharded.results[0].test_accuracy == plain.results[0].test_accuracy);
  } else {  // evaluated in blocks of rows rather than whole: a rounding may tip one of the 96 examples
    CHECK(sharded.results[0].test_accuracy == Approx(plain.results[0].test_accuracy).margin(0.011));
  }
}

TEST_CASE("sharded: --shard parameters trains value targets (--loss mse) where plain sync does", "[sharded][equivalence][parameters]") {
  const Dataset train = linear_values(48 * 40, 41), test = linear_values(96, 42);
  TrainOptions o = sharded_job();
  o.loss = "mse";
  o.lr = 0.01f;
  const int replicas = GENERATE(2, 4);
  const auto [plain, sharded] =
      troupe::testing::check_sharded_matches_plain(replicas, o, train, test, ShardStage::parameters, 2048);
  CHECK(sharded.results[0].test_accuracy == -1);  // a regression counts nothing
  CHECK(sharded.results[0].test_loss == Approx(plain.results[0].test_loss).epsilon(1e-5));
  CHECK(sharded.results[0].test_loss < 0.5 * sharded.results[0].history.front().train_loss);  // it learned
}

TEST_CASE("sharded: --shard parameters refuses a precision its model's layers do not compute in", "[sharded][errors][parameters]") {
  const Dataset train = blobs(48 * 10, 4, 6, 39), test = blobs(96, 4, 6, 40);
  TrainOptions o = sharded_job();
  o.model = "cnn";  // its whole step computes in bf16, its LayerModel in f32
  o.trainer_args = {"channels=4", "kernel=3"};
  o.precision = DType::bf16;
  auto run = run_stage(2, o, train, test, ShardStage::parameters);
  REQUIRE_FALSE(run.status[0].ok());
  CHECK(run.status[0].code() == Code::invalid_argument);
  CHECK_THAT(run.status[0].message(), Catch::Contains("its layers compute in f32 only (LayerModel::computes_in)"));
}

TEST_CASE("sharded: --shard parameters holds its 1/N of the parameters and at most two layers gathered",
          "[sharded][parameters][memory]") {
  const Dataset train = blobs(48 * 10, 4, 6, 31), test = blobs(96, 4, 6, 32);
  TrainOptions o = sharded_job();
  o.hidden = {256, 256, 256, 256, 256, 256, 256, 256};  // 9 layers of 256 KiB: the model is 2.1 MB
  o.max_steps = 5;  // (this deep ReLU net under adam is chaotic: plain sync parts from one process by
                    // 2% in 100 steps, so only the first steps are compared)
  const int replicas = 4;
  auto plain = run_stage(replicas, o, train, test, ShardStage::none, 2048);
  REQUIRE(plain.all_ok());
  auto sharded = run_stage(replicas, o, train, test, ShardStage::parameters);
  INFO(sharded.errors());
  REQUIRE(sharded.all_ok());
  CHECK(relative_difference(sharded.params[0], plain.params[0]) < 1e-5);
  const double n = static_cast<double>(sharded.params[0].size());
  std::vector<double> layer = {36.0 * 256 + 256};
  for (int l = 0; l < 7; ++l) layer.push_back(256.0 * 256 + 256);
  layer.push_back(256.0 * 4 + 4);
  double two_largest = 0;
  for (size_t i = 0; i + 1 < layer.size(); ++i) two_largest = std::max(two_largest, layer[i] + layer[i + 1]);
  for (int r = 0; r < replicas; ++r) {
    const ShardStats& m = sharded.memory[r];
    WARN("--shard parameters, rank " << r << " of " << replicas << ": parameters resident at their peak "
                                     << m.parameters << " bytes, gradients " << m.gradients_peak << ", optimizer "
                                     << m.optimizer << "; the model " << 4 * n << " bytes, 16/N = "
                                     << 16 * n / replicas << ", two layers " << 4 * two_largest);
    CHECK(m.parameters > 0);
    CHECK(static_cast<double>(m.parameters) <= 4 * (n / replicas + two_largest) + 8 * 4096);
    CHECK(static_cast<double>(m.parameters) < 0.8 * 4 * n);  // never the whole model during training
    CHECK(static_cast<double>(m.gradients_peak) <= 4 * (n / replicas + two_largest) + 8 * 4096);
    CHECK(m.optimizer <= static_cast<int64_t>(8 * (n / replicas + 4)));
  }
}

TEST_CASE("sharded: --shard parameters checkpoints resume on another number of replicas, sharded or not",
          "[sharded][checkpoint][parameters]") {
  const Dataset train = blobs(48 * 100, 4, 6, 33), test = blobs(96, 4, 6, 34);
  TrainOptions o = sharded_job();
  auto whole = run_stage(2, o, train, test, ShardStage::parameters);
  INFO(whole.errors());
  REQUIRE(whole.all_ok());
  TempDir dir;
  const FirstCheckpoint checkpoint =
      first_checkpoint(4, o, train, test, ShardStage::parameters, kDefaultBucketBytes, 30, dir.path());
  const checkpoint::TrainingState step_only = step_of(checkpoint);
  for (int way = 0; way < 3; ++way) {
    const ShardStage stage = way == 0 ? ShardStage::none : ShardStage::parameters;
    const bool ranges = way == 2;  // each replica reads its chunks of the layers only
    auto resumed = run_replica_threads(3, o, train, test, [&](int, Replica& r, TrainOptions&) {
      r.shard = stage;
      resume_from(checkpoint, ranges, step_only, r);
    });
    INFO("--shard " << shard_stage_name(stage) << (ranges ? ", each reading its ranges" : "") << "\n"
                    << resumed.errors());
    REQUIRE(resumed.all_ok());
    CHECK(relative_difference(resumed.params[0], whole.params[0]) < 1e-5);
  }
}

TEST_CASE("sharded: a replica that dies inside a layer's gather makes the others fail naming it", "[sharded][errors][parameters]") {
  const Dataset train = blobs(48 * 100, 4, 6, 35), test = blobs(96, 4, 6, 36);
  TrainOptions o = sharded_job();
  auto run = run_replica_threads(3, o, train, test, [](int rank, Replica& r, TrainOptions& mine) {
    r.shard = ShardStage::parameters;
    r.timeout = std::chrono::seconds(5);
    if (rank == 2) mine.max_steps = 9;  // leaves while the others gather step 10's layers
  });
  for (int r : {0, 1}) {
    INFO(run.status[r].to_string());
    REQUIRE_FALSE(run.status[r].ok());
    CHECK(run.status[r].message().find("rank 2") != std::string::npos);
    CHECK(run.status[r].message().find("step 10") != std::string::npos);
  }
}

TEST_CASE("sharded: --save of a --shard parameters job is written layer by layer, holding the trained parameters",
          "[sharded][parameters][save]") {
  const Dataset train = blobs(48 * 100, 4, 6, 37), test = blobs(96, 4, 6, 38);
  TrainOptions o = sharded_job();
  o.max_steps = 30;
  auto gathered = run_stage(3, o, train, test, ShardStage::parameters);  // the parameters, gathered whole
  INFO(gathered.errors());
  REQUIRE(gathered.all_ok());
  TempDir dir;
  o.save_path = dir.path() + "/model.safetensors";
  // As a job's replicas run: nobody asks for the whole parameters, so --save writes each layer as
  // it is gathered (never the whole model in any replica).
  auto transports = collectives::make_inproc_group(3);
  std::vector<Status> status(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      Replica replica;
      replica.comm = &comm;
      replica.timeout = std::chrono::seconds(30);
      replica.shard = ShardStage::parameters;
      auto result = train_replica(o, train, test, replica, {}, nullptr);
      status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  for (const Status& s : status) REQUIRE(s.ok());
  auto setup = set_up_trainer(o, train.spec(), 0, 1);
  REQUIRE(setup.ok());
  auto file = data::read_safetensors(o.save_path);
  INFO(file.status().to_string());
  REQUIRE(file.ok());
  REQUIRE(file->tensors.size() == setup->space.blocks().size());
  for (const ParamBlock& b : setup->space.blocks()) {
    INFO(b.name);
    const data::NamedTensor* t = file->find(b.name);
    REQUIRE(t != nullptr);
    auto values = data::tensor_as_f32(*t, b.name);
    REQUIRE(values.ok());
    const std::vector<float> want(gathered.params[0].begin() + static_cast<std::ptrdiff_t>(b.param.offset),
                                  gathered.params[0].begin() + static_cast<std::ptrdiff_t>(b.param.offset + b.param.numel));
    CHECK(*values == want);  // the same run: bit for bit
  }
  CHECK(file->metadata.at("troupe.trainer") == "mlp");
}
