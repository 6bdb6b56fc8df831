// The sync strategy's replica loop (train_replica): N replicas over a collective group hold the
// parameters one process training on the global batch would hold, to rounding, with gradients
// all-reduced in buckets while backward runs (the default) or in one all-reduce after it; a global
// batch that does not divide, replicas that diverge, a replica that dies and a trainer that misuses
// Gradients::ready are clear errors on the others.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <thread>

#include <unistd.h>

#include "collectives/inproc_transport.h"
#include "core/config.h"
#include "collectives/shm_transport.h"
#include "tests/trainers/blobs.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"
#include "tests/support/numeric_test_util.h"

using namespace troupe;
using namespace troupe::collectives;

using troupe::testing::relative_difference;

namespace {

struct ReplicaRun {
  std::vector<Status> status;
  std::vector<std::vector<float>> params;
  std::vector<TrainResult> results;
};

// Runs one replica per thread over `transports`; `adjust` may change a replica's options.
ReplicaRun run_replicas(std::vector<std::unique_ptr<Transport>> transports, const TrainOptions& o,
                        const Dataset& train, const Dataset& test,
                        const std::function<void(int, TrainOptions&)>& adjust = {},
                        size_t bucket_bytes = kDefaultBucketBytes) {
  const size_t n = transports.size();
  ReplicaRun run{std::vector<Status>(n), std::vector<std::vector<float>>(n), std::vector<TrainResult>(n)};
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move(transports[r]));
      TrainOptions mine = o;
      if (adjust) adjust(static_cast<int>(r), mine);
      Replica replica;
      replica.comm = &comm;
      replica.checksum_every = 10;
      replica.timeout = std::chrono::seconds(20);
      replica.bucket_bytes = bucket_bytes;
      auto result = train_replica(mine, train, test, replica, {}, &run.params[r]);
      if (result.ok()) run.results[r] = *result; else run.status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  return run;
}


double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

TrainOptions job() {
  TrainOptions o;
  o.hidden = {256, 128};
  o.epochs = 2;
  o.batch_size = 128;
  o.seed = 11;
  return o;
}

// Three replicas of a tiny MLP on blobs, with `adjust` changing one replica's options (the failure
// tests); returns each replica's status.
std::vector<Status> run_three_tiny(const std::function<void(int, TrainOptions&)>& adjust) {
  const Dataset train = blobs(400, 2, 3, 7), test = blobs(20, 2, 3, 8);
  TrainOptions o = job();
  o.hidden = {4};
  o.batch_size = 21;
  return run_replicas(make_inproc_group(3), o, train, test, adjust).status;
}

// A trainer of one block whose forward_backward announces it twice: a misuse of Gradients::ready.
class ReadyTwice final : public Trainer {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    w_ = space.declare("w", {ctx.data.features, ctx.data.classes}, Init::zeros());
    return {};
  }
  Expected<BatchStats> forward_backward(const Batch&, const Parameters&, Gradients& grads) override {
    grads.ready(w_);
    grads.ready(w_);
    return BatchStats{1.0f, -1};
  }
  Expected<BatchStats> evaluate(const Batch&, const Parameters&) override { return BatchStats{1.0f, -1}; }

 private:
  Param w_;
};
TROUPE_REGISTER_TRAINER("test-ready-twice", ReadyTwice);

}  // namespace

TEST_CASE("sync: 4 replicas with global batch 128 hold the parameters of one process training on batch 128",
          "[sync][equivalence]") {
  auto loaded_train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
  auto loaded_test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
  REQUIRE(loaded_train.ok());
  REQUIRE(loaded_test.ok());
  TrainOptions o = job();
  o.max_steps = 60;
  o.epochs = 1;
  std::vector<float> single;
  auto one = train_with_trainer(o, *loaded_train, *loaded_test, {}, &single);
  REQUIRE(one.ok());
  for (const char* optimizer : {"adam", "sgd"}) {
    o.optimizer = optimizer;
    std::vector<float> want;
    REQUIRE(train_with_trainer(o, *loaded_train, *loaded_test, {}, &want).ok());
    ReplicaRun run = run_replicas(make_inproc_group(4), o, *loaded_train, *loaded_test);
    for (int r = 0; r < 4; ++r) {
      INFO(optimizer << " replica " << r << ": " << run.status[r].to_string());
      REQUIRE(run.status[r].ok());
      CHECK(run.params[r] == run.params[0]);  // every replica holds the same parameters, bit for bit
      CHECK(run.results[r].steps == 60);
    }
    const double diff = relative_difference(run.params[0], want);
    INFO(optimizer << ": relative difference " << diff << ", largest element difference "
                   << max_abs_difference(run.params[0], want));
    CHECK(diff <= 1e-5);
  }
}

TEST_CASE("sync: the cnn's replicas, all-reducing its blocks as backward announces them, hold one process's "
          "parameters", "[sync][equivalence][cnn]") {
  // Small buckets (1 KiB) put the CNN's 8 blocks in several buckets, so all-reduces overlap backward.
  const Dataset train = blobs(240, 4, 8, 3), test = blobs(40, 4, 8, 4);
  TrainOptions o = job();
  o.model = "cnn";
  o.trainer_args = {"channels=4,8", "kernel=3", "hidden=16"};
  o.batch_size = 24;
  std::vector<float> want;
  REQUIRE(train_with_trainer(o, train, test, {}, &want).ok());
  ReplicaRun run = run_replicas(make_inproc_group(3), o, train, test, {}, 1024);
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r << ": " << run.status[r].to_string());
    REQUIRE(run.status[r].ok());
    CHECK(run.params[r] == run.params[0]);
  }
  const double diff = relative_difference(run.params[0], want);
  INFO("relative difference " << diff);
  CHECK(diff <= 1e-5);
}

TEST_CASE("sync: replicas over shared memory train blobs to the same accuracy on every replica", "[sync]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  TrainOptions o = job();
  o.hidden = {16};
  o.batch_size = 40;
  o.epochs = 4;
  std::vector<std::unique_ptr<Transport>> transports(4);
  std::vector<std::thread> joins;
  std::vector<Status> joined(4);
  for (int r = 0; r < 4; ++r)
    joins.emplace_back([&, r] {
      ShmGroupOptions s;
      s.name = "sync-test-" + std::to_string(::getpid());
      s.rank = r;
      s.size = 4;
      s.timeout = std::chrono::seconds(20);
      auto t = connect_shm_group(s);
      if (t.ok()) transports[r] = std::move(*t); else joined[r] = t.status();
    });
  for (auto& t : joins) t.join();
  for (auto& s : joined) REQUIRE(s.ok());
  ReplicaRun run = run_replicas(std::move(transports), o, train, test);
  for (int r = 0; r < 4; ++r) {
    INFO("replica " << r << ": " << run.status[r].to_string());
    REQUIRE(run.status[r].ok());
    CHECK(run.results[r].test_accuracy == run.results[0].test_accuracy);
    CHECK(run.results[r].history.back().train_loss == run.results[0].history.back().train_loss);
  }
  CHECK(run.results[0].test_accuracy > 0.9);
}

// A sync job on one host keeps its gradients in the shm group's arena (Communicator::
// shared_buffer, asked for by job_worker.cc): the all-reduces read and write them in place. The
// replicas end where the staged path's end, bit for bit, with buckets and with one all-reduce, and
// the arena holds the last step's averaged gradients (nothing else writes it).
TEST_CASE("sync: replicas over shared memory with an arena keep their gradients in it and end where the staged "
          "path ends", "[sync][shm]") {
  const Dataset train = blobs(800, 4, 6, 1), test = blobs(200, 4, 6, 2);
  TrainOptions o = job();  // 36-256-128-4: 172 KB of gradients, above the 64 KiB the arena reduces in place
  o.batch_size = 40;
  o.epochs = 1;
  auto setup = set_up_trainer(o, train.spec(), 0, 1);
  REQUIRE(setup.ok());
  const size_t bytes = (setup->space.size() + 2) * sizeof(float);
  for (size_t bucket_bytes : {size_t{0}, kDefaultBucketBytes}) {
    std::vector<float> staged_params;
    for (bool arena : {false, true}) {
      CAPTURE(bucket_bytes, arena);
      std::vector<std::unique_ptr<Communicator>> comms(2);
      std::vector<Status> status(2);
      std::vector<std::vector<float>> params(2);
      {
        std::vector<std::thread> joins;
        for (int r = 0; r < 2; ++r)
          joins.emplace_back([&, r] {
            ShmGroupOptions s;
            s.name = "sync-arena-" + std::to_string(::getpid()) + (arena ? "-a" : "-s") + std::to_string(bucket_bytes);
            s.rank = r;
            s.size = 2;
            s.timeout = std::chrono::seconds(20);
            s.shared_buffer_bytes = arena ? bytes : 0;
            auto t = connect_shm_group(s);
            if (t.ok()) comms[r] = std::make_unique<Communicator>(std::move(*t)); else status[r] = t.status();
          });
        for (auto& t : joins) t.join();
      }
      for (auto& st : status) REQUIRE(st.ok());
      {
        std::vector<std::thread> runs;
        for (int r = 0; r < 2; ++r)
          runs.emplace_back([&, r] {
            Replica replica;
            replica.comm = comms[r].get();
            replica.bucket_bytes = bucket_bytes;
            auto res = train_replica(o, train, test, replica, {}, &params[r]);
            if (!res.ok()) status[r] = res.status();
          });
        for (auto& t : runs) t.join();
      }
      for (int r = 0; r < 2; ++r) {
        INFO("replica " << r << ": " << status[r].to_string());
        REQUIRE(status[r].ok());
        CHECK(params[r] == params[0]);
      }
      if (!arena) {
        CHECK(comms[0]->shared_buffer(bytes) == nullptr);
        staged_params = params[0];
        continue;
      }
      CHECK(params[0] == staged_params);
      const float* held = static_cast<const float*>(comms[0]->shared_buffer(bytes));
      REQUIRE(held != nullptr);
      size_t nonzero = 0;
      for (size_t i = 0; i < setup->space.size(); ++i) nonzero += held[i] != 0.0f;
      CHECK(nonzero > setup->space.size() / 2);  // the last step's gradients, in place
      CHECK(held[setup->space.size()] > 0.0f);    // and its mean loss in the first slot after them
    }
  }
}

TEST_CASE("sync: a global batch that does not divide among the replicas is refused", "[sync][errors]") {
  const Dataset train = blobs(100, 2, 3, 7), test = blobs(20, 2, 3, 8);
  TrainOptions o = job();
  o.hidden = {4};
  o.batch_size = 10;
  ReplicaRun run = run_replicas(make_inproc_group(3), o, train, test);
  for (const Status& s : run.status) {
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find("--batch-size 10 (the global batch) does not divide among 3 replicas") != std::string::npos);
  }
}

TEST_CASE("sync: replicas that start from different seeds are stopped at the first checksum, naming one", "[sync][errors]") {
  const std::vector<Status> status = run_three_tiny([](int r, TrainOptions& mine) {
    if (r == 2) mine.seed = 12;
  });
  for (const Status& s : status) {
    INFO(s.to_string());
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("replicas diverged: at step 10 replica 2's parameter checksum") != std::string::npos);
  }
}

TEST_CASE("sync: a replica that stops makes the others fail naming it instead of waiting", "[sync][errors]") {
  // Replica 1 asks for fewer steps: it leaves the group while the others still all-reduce.
  const std::vector<Status> status = run_three_tiny([](int r, TrainOptions& mine) {
    if (r == 1) mine.max_steps = 5;
  });
  for (int r : {0, 2}) {
    INFO(status[r].to_string());
    REQUIRE_FALSE(status[r].ok());
    CHECK(status[r].message().find("rank 1") != std::string::npos);
    // The bucketed all-reduce of step 6 (the tiny MLP is one bucket) is where it shows.
    CHECK(status[r].message().find("all-reducing gradients at epoch 1, step 6: gradient bucket 1 of 1 (blocks w0..b1") !=
          std::string::npos);
  }
}

TEST_CASE("sync: replicas with gradient buckets hold the parameters of replicas with one all-reduce",
          "[sync][buckets][equivalence]") {
  auto loaded_train = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
  auto loaded_test = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::test);
  REQUIRE(loaded_train.ok());
  REQUIRE(loaded_test.ok());
  TrainOptions o = job();
  o.max_steps = 60;
  o.epochs = 1;
  std::vector<float> single;
  REQUIRE(train_with_trainer(o, *loaded_train, *loaded_test, {}, &single).ok());
  ReplicaRun whole = run_replicas(make_inproc_group(4), o, *loaded_train, *loaded_test, {}, 0);
  REQUIRE(whole.status[0].ok());
  // 16 KiB: 5 buckets; 256 KiB (the default): 2; 4 MiB: one bucket, still through the comm thread.
  for (size_t bytes : {size_t{16} << 10, size_t{256} << 10, size_t{4} << 20}) {
    ReplicaRun run = run_replicas(make_inproc_group(4), o, *loaded_train, *loaded_test, {}, bytes);
    for (int r = 0; r < 4; ++r) {
      INFO(bytes << " bytes, replica " << r << ": " << run.status[r].to_string());
      REQUIRE(run.status[r].ok());
      CHECK(run.params[r] == run.params[0]);
      CHECK(run.results[r].steps == 60);
    }
    INFO(bytes << " bytes: largest element difference " << max_abs_difference(run.params[0], whole.params[0]));
    CHECK(relative_difference(run.params[0], whole.params[0]) <= 1e-6);
    CHECK(relative_difference(run.params[0], single) <= 1e-5);
  }
}

TEST_CASE("sync: a trainer that never calls ready() trains the same with buckets on", "[sync][buckets]") {
  const Dataset train = blobs(400, 4, 5, 1), test = blobs(80, 4, 5, 2);
  TrainOptions o = job();
  o.model = "test-linear";  // tests/trainers/sync/trainer_driver_test.cc: announces nothing
  o.batch_size = 20;
  o.lr = 0.01f;
  ReplicaRun whole = run_replicas(make_inproc_group(2), o, train, test, {}, 0);
  ReplicaRun bucketed = run_replicas(make_inproc_group(2), o, train, test, {}, 64);  // w and b apart
  for (int r = 0; r < 2; ++r) {
    INFO("replica " << r << ": " << whole.status[r].to_string() << " / " << bucketed.status[r].to_string());
    REQUIRE(whole.status[r].ok());
    REQUIRE(bucketed.status[r].ok());
  }
  CHECK(relative_difference(bucketed.params[0], whole.params[0]) <= 1e-6);
}

TEST_CASE("sync: a trainer that announces a block twice stops the job naming the block and the step",
          "[sync][buckets][errors]") {
  const Dataset train = blobs(100, 2, 3, 7), test = blobs(20, 2, 3, 8);
  TrainOptions o = job();
  o.model = "test-ready-twice";
  o.batch_size = 20;
  ReplicaRun run = run_replicas(make_inproc_group(2), o, train, test);
  for (const Status& s : run.status) {
    INFO(s.to_string());
    CHECK(s.code() == Code::invalid_argument);
    CHECK(s.message().find("at epoch 1, step 1: grads.ready() was called twice for block 'w'") != std::string::npos);
  }
}
