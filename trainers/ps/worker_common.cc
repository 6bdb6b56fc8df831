#include "trainers/ps/worker_common.h"

#include <chrono>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

namespace troupe::ps {

namespace {

Status refusal(const TrainOptions& o, const Dataset& train, const PsWorker& w) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  if (w.workers < 1 || w.rank < 0 || w.rank >= w.workers)
    return invalid_argument("worker rank " + std::to_string(w.rank) + " of " + std::to_string(w.workers));
  const int parts = w.workers * o.accumulate;
  if (o.batch_size % parts != 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + std::to_string(w.workers) + " workers" +
                            (o.accumulate > 1 ? " x " + std::to_string(o.accumulate) + " micro-batches" : "") +
                            "; use a multiple of " + std::to_string(parts));
  if (train.count / o.batch_size == 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  return {};
}

}  // namespace

Status check_worker_options(const TrainOptions& o, const Dataset& train, const PsWorker& w) {
  if (!w.client) return invalid_argument("train_ps_worker: no parameter-server client");
  return finish_on_error(*w.client, refusal(o, train, w));
}

Status finish_on_error(PsClient& client, Status st) {
  if (!st.ok()) (void)client.finish();
  return st;
}

void wait_for_all_workers(PsClient& client, int rank) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::minutes(10);
  std::vector<float> scratch(client.parameters());
  while (true) {
    auto pulled = client.pull_final(scratch.data());
    if (pulled.ok()) return;
    if (pulled.status().code() != Code::timeout || Clock::now() >= deadline) {
      spdlog::warn("worker {}, finished, stopped waiting for the other workers to finish: {}", rank,
                   pulled.status().to_string());
      return;
    }
  }
}

}  // namespace troupe::ps
