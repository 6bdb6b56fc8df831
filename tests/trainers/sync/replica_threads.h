// N sync replicas of one job, one thread each over an in-process group (or a shared-memory one):
// what each ended with.
#pragma once

#include <functional>
#include <utility>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <atomic>
#include <string>

#include <unistd.h>

#include "collectives/inproc_transport.h"
#include "collectives/shm_transport.h"
#include "tests/support/numeric_test_util.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe::testing {

struct ReplicaThreads {
  std::vector<Status> status;
  std::vector<std::vector<float>> params;
  std::vector<TrainResult> results;
  std::vector<ShardStats> memory;
  bool all_ok() const {
    for (const Status& s : status)
      if (!s.ok()) return false;
    return true;
  }
  bool identical() const {  // every replica ended with the same parameters
    for (const auto& p : params)
      if (p != params.front()) return false;
    return true;
  }
  std::string errors() const {
    std::string out;
    for (size_t r = 0; r < status.size(); ++r)
      if (!status[r].ok()) out += "replica " + std::to_string(r) + ": " + status[r].to_string() + "\n";
    return out;
  }
};

// n transports of an in-process group, or with `shm` of a shared-memory one (its native
// collectives: every element summed over the ranks in rank order, whichever the call).
inline std::vector<std::unique_ptr<collectives::Transport>> replica_group(int n, bool shm) {
  if (!shm) return collectives::make_inproc_group(n);
  static std::atomic<int> groups{0};
  const std::string name = "replicas-" + std::to_string(::getpid()) + "-" + std::to_string(groups++);
  std::vector<std::unique_ptr<collectives::Transport>> out(n);
  std::vector<Status> status(n);
  std::vector<std::thread> joins;
  for (int r = 0; r < n; ++r)
    joins.emplace_back([&, r] {
      collectives::ShmGroupOptions s;
      s.name = name;
      s.rank = r;
      s.size = n;
      s.timeout = std::chrono::seconds(20);
      auto t = collectives::connect_shm_group(s);
      if (t.ok()) out[r] = std::move(*t); else status[r] = t.status();
    });
  for (auto& t : joins) t.join();
  for (const Status& st : status) REQUIRE(st.ok());
  return out;
}

// `configure` sets up each replica (its comm is set already) and may change its options.
inline ReplicaThreads run_replica_threads(int n, const TrainOptions& o, const Dataset& train, const Dataset& test,
                                          const std::function<void(int, Replica&, TrainOptions&)>& configure,
                                          bool shm = false) {
  auto transports = replica_group(n, shm);
  ReplicaThreads run;
  run.status.resize(n);
  run.params.resize(n);
  run.results.resize(n);
  run.memory.resize(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      Replica replica;
      replica.comm = &comm;
      replica.timeout = std::chrono::seconds(30);
      TrainOptions mine = o;
      if (configure) configure(r, replica, mine);
      if (replica.shard != ShardStage::none) replica.shard_stats = &run.memory[r];
      auto result = train_replica(mine, train, test, replica, {}, &run.params[r]);
      if (result.ok()) run.results[r] = *result; else run.status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  return run;
}

// The replicas with --shard `stage` (none: plain sync) and gradient buckets of `bucket_bytes`.
inline ReplicaThreads run_stage(int n, const TrainOptions& o, const Dataset& train, const Dataset& test,
                                ShardStage stage, size_t bucket_bytes = kDefaultBucketBytes, bool shm = false) {
  return run_replica_threads(
      n, o, train, test,
      [&](int, Replica& r, TrainOptions&) {
        r.shard = stage;
        r.bucket_bytes = bucket_bytes;
      },
      shm);
}

// Plain sync replicas (buckets of `plain_bucket_bytes`) and the same job's under --shard `stage`
// (default buckets): both succeed, the sharded ones end identical to each other and within 1e-5
// (relative) of plain sync's parameters. Both runs, for the caller's further checks.
inline std::pair<ReplicaThreads, ReplicaThreads> check_sharded_matches_plain(int n, const TrainOptions& o,
                                                                             const Dataset& train, const Dataset& test,
                                                                             ShardStage stage,
                                                                             size_t plain_bucket_bytes,
                                                                             bool shm = false) {
  auto plain = run_stage(n, o, train, test, ShardStage::none, plain_bucket_bytes, shm);
  INFO(plain.errors());
  REQUIRE(plain.all_ok());
  auto sharded = run_stage(n, o, train, test, stage, kDefaultBucketBytes, shm);
  INFO(n << " replicas, --shard " << shard_stage_name(stage) << "\n" << sharded.errors());
  REQUIRE(sharded.all_ok());
  CHECK(sharded.identical());
  const double diff = relative_difference(sharded.params[0], plain.params[0]);
  INFO("relative difference to plain sync: " << diff);
  CHECK(diff < 1e-5);
  return {std::move(plain), std::move(sharded)};
}

}  // namespace troupe::testing
