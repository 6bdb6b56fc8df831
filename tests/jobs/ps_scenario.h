// A small async parameter-server job in one process, for the tests of takeover, replay and resume:
// the first 1300 Fashion-MNIST training examples (4 ledger shards of 325, so batches of 64 cross
// from one shard into the next), the real MLP with SGD, two parameter shards, the shard ledger in
// an in-memory store.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "trainers/checkpoint/checkpoint.h"
#include "data/readers/fashion_mnist.h"
#include "trainers/job/ledger_feed.h"
#include "trainers/ps/ps_job.h"

namespace troupe::testing {

constexpr int kPsLedgerShards = 4;

struct PsScenario {
  gcs::InMemoryStore store;
  JobId job = JobId::random();
  Dataset train, test;
  TrainOptions o;
  job::LedgerFeedOptions fo;  // each worker's (global batch 64 / workers rows)
  int workers = 1;
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;

  explicit PsScenario(int worker_count = 1) : workers(worker_count) {
    auto loaded = load_fashion_mnist(TROUPE_DEFAULT_DATASET_DIR, Split::train);
    REQUIRE(loaded.ok());
    train = std::move(*loaded);
    train.count = 1300;
    train.images.resize(static_cast<size_t>(train.count * train.features()));
    train.labels.resize(static_cast<size_t>(train.count));
    test = train;
    o.epochs = 1;
    o.batch_size = 64;
    o.seed = 3;
    o.optimizer = "sgd";
    fo.batch_size = 64 / workers;
    fo.plan.shards = kPsLedgerShards;
    fo.plan.seed = o.seed;
    fo.plan.block = fo.batch_size;
    fo.keep_partial = true;
    for (int i = 0; i < 2; ++i) shards.push_back(make_shard(i));
  }
  // A fresh shard i of the job (the initial parameters).
  std::unique_ptr<ps::ParameterShard> make_shard(int i) const {
    ps::PsJobShape shape;
    shape.shards = 2;
    shape.workers = workers;
    shape.train_examples = train.count;
    auto s = ps::make_job_shard(o, DataSpec{train.features(), train.classes}, shape, i);
    REQUIRE(s.ok());
    return std::move(*s);
  }
  std::vector<ps::ParameterShard*> raw() { return {shards[0].get(), shards[1].get()}; }
};

// The shard files two parameter shards write every `every` versions into a temporary directory,
// collected by version, and a version loaded back whole.
struct PsCheckpointFiles {
  TempDir dir;
  std::mutex mu;
  std::map<int64_t, std::vector<checkpoint::WrittenShard>> by_version;

  ps::ShardCheckpointing every(int64_t versions, int index, const std::string& tag) {
    ps::ShardCheckpointing c;
    c.every = versions;
    c.dir = dir.path();
    c.tag = tag;
    c.steps_per_epoch = 100;
    c.written = [this, index](const checkpoint::WrittenShard& w, int64_t version) {
      std::lock_guard<std::mutex> lock(mu);
      auto& v = by_version[version];
      v.resize(2);
      v[static_cast<size_t>(index)] = w;
      return Status{};
    };
    return c;
  }
  checkpoint::TrainingState load(int64_t version, const std::string& tag) {
    checkpoint::Manifest m;
    m.tag = tag;
    m.step = version;
    m.dir = checkpoint::step_dir(dir.path(), version);
    {
      std::lock_guard<std::mutex> lock(mu);
      REQUIRE(by_version.count(version));
      m.shards = by_version.at(version);
    }
    auto state = checkpoint::load_checkpoint(m);
    REQUIRE(state.ok());
    return std::move(*state);
  }
};

}  // namespace troupe::testing
