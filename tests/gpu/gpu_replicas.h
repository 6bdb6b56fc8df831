// Runs n GPU sync replicas (trainers/cuda/cuda_replica.h) as threads on device 0, staged through an
// in-process host group (n = 1: no communicator): what replica_test and loss_scale_test train.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "collectives/device_communicator.h"
#include "collectives/inproc_transport.h"
#include "trainers/cuda/cuda_replica.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe::test {

struct ReplicaRun {
  std::vector<Expected<TrainResult>> results;
  std::vector<std::vector<float>> params;
};

// n threads, each running body(r, its in-process transport, &result, &params).
template <class Body>
ReplicaRun run_threads(int n, Body body) {
  ReplicaRun run{std::vector<Expected<TrainResult>>(n, Expected<TrainResult>(internal_error("not run"))),
                 std::vector<std::vector<float>>(n)};
  auto transports = collectives::make_inproc_group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { body(r, std::move(transports[r]), &run.results[r], &run.params[r]); });
  for (auto& t : threads) t.join();
  return run;
}

inline ReplicaRun run_gpu_replicas(int n, const TrainOptions& o, const Dataset& train, const Dataset& test) {
  return run_threads(n, [&](int, auto transport, Expected<TrainResult>* result, std::vector<float>* params) {
    std::unique_ptr<collectives::DeviceCommunicator> comm;
    if (n > 1) {
      auto staged = collectives::make_staged_communicator(
          std::make_unique<collectives::Communicator>(std::move(transport)), 0);
      if (!staged.ok()) {
        *result = staged.status();
        return;
      }
      comm = std::move(*staged);
    }
    CudaReplica replica;
    replica.device = 0;
    replica.comm = comm.get();
    replica.timeout = std::chrono::seconds(60);
    *result = train_replica_cuda(o, train, test, replica, {}, params);
  });
}

// The same n replicas on the CPU (train_replica over an in-process group), for comparison.
inline ReplicaRun run_cpu_replicas(int n, const TrainOptions& o, const Dataset& train, const Dataset& test) {
  return run_threads(n, [&](int, auto transport, Expected<TrainResult>* result, std::vector<float>* params) {
    collectives::Communicator comm(std::move(transport));
    Replica replica;
    replica.comm = n > 1 ? &comm : nullptr;
    replica.timeout = std::chrono::seconds(60);
    *result = train_replica(o, train, test, replica, {}, params);
  });
}

}  // namespace troupe::test
