// Parameter-server jobs for tests: the shard servers of a job on loopback, and its workers run on
// threads over real TCP clients.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <thread>

#include "tests/support/numeric_test_util.h"
#include "data/feed/batch_feed.h"
#include "trainers/ps/async_worker.h"
#include "trainers/ps/ps_job.h"
#include "trainers/ps/ps_server.h"

namespace troupe::ps {

// A job of `workers` workers over 2 shards, with a generous wait (tests run beside each other).
inline PsJobShape ps_shape(PsMode mode, int workers, int64_t train_examples, int64_t staleness = -1) {
  PsJobShape s;
  s.mode = mode;
  s.workers = workers;
  s.shards = 2;
  s.staleness = staleness;
  s.train_examples = train_examples;
  s.wait_timeout = std::chrono::seconds(120);
  return s;
}

struct PsJob {
  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;
};

inline PsJob start_ps_job(const TrainOptions& o, DataSpec data, const PsJobShape& shape,
                          const std::string& job = "job-1",
                          const std::function<void(ParameterShard&)>& adjust = {}) {
  PsJob j;
  for (int i = 0; i < shape.shards; ++i) {
    auto shard = make_job_shard(o, data, shape, i);
    REQUIRE(shard.ok());
    if (adjust) adjust(**shard);
    PsServerOptions so;
    so.job = job;
    auto server = PsServer::start(std::move(*shard), so);
    REQUIRE(server.ok());
    j.addresses.push_back((*server)->address());
    j.servers.push_back(std::move(*server));
  }
  return j;
}

struct WorkerRuns {
  std::vector<Status> status;
  std::vector<TrainResult> results;
  std::vector<PsWorkerReport> reports;
  std::vector<std::vector<float>> params;
};

// Runs `workers` workers on threads, each with its own TCP client and SliceFeed.
inline WorkerRuns run_ps_workers(const PsJob& job, int workers, const TrainOptions& o, const Dataset& train,
                                 const Dataset& test, bool want_params = false, int64_t start_step = 0) {
  WorkerRuns run{std::vector<Status>(workers), std::vector<TrainResult>(workers),
                 std::vector<PsWorkerReport>(workers), std::vector<std::vector<float>>(workers)};
  std::vector<std::thread> threads;
  for (int r = 0; r < workers; ++r)
    threads.emplace_back([&, r] {
      PsClientOptions co;
      co.job = "job-1";
      co.rank = r;
      co.timeout = std::chrono::seconds(300);  // above the shards' wait_timeout
      auto client = connect_ps(job.addresses, co);
      if (!client.ok()) {
        run.status[r] = client.status();
        return;
      }
      SliceFeed feed(train, o.seed, o.batch_size, r, workers);
      PsWorker worker{client->get(), r, workers};
      worker.start_step = start_step;
      auto result = train_ps_worker(o, train, test, feed, worker, {}, &run.reports[r],
                                    want_params ? &run.params[r] : nullptr);
      if (result.ok()) run.results[r] = *result;
      else run.status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  return run;
}

// Central mode's promise: every worker ended with the same parameters, within `tolerance`
// (relative) of `want`, one process's on the global batch.
inline void check_central_equivalence(const WorkerRuns& run, const std::vector<float>& want, double tolerance = 1e-5) {
  for (size_t r = 0; r < run.status.size(); ++r) {
    INFO("worker " << r << ": " << run.status[r].to_string());
    REQUIRE(run.status[r].ok());
    CHECK(run.params[r] == run.params[0]);
  }
  const double diff = troupe::testing::relative_difference(run.params[0], want);
  INFO("relative difference " << diff);
  CHECK(diff <= tolerance);
}

}  // namespace troupe::ps
