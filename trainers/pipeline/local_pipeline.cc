#include "trainers/pipeline/local_pipeline.h"

#include <memory>
#include <thread>

#include "collectives/inproc_transport.h"
#include "trainers/pipeline/stage_checkpoint.h"

namespace troupe::pipeline {

Expected<LocalPipelineResult> train_local_pipeline(const TrainOptions& o, const PipelineOptions& po,
                                                   const Dataset& train, const Dataset& test,
                                                   const ProgressFn& progress, std::chrono::milliseconds timeout,
                                                   const LocalCheckpoints& lc) {
  TROUPE_RETURN_IF_ERROR(validate(po, o.batch_size));
  const int stages = po.stages, replicas = po.replicas();
  const size_t workers = static_cast<size_t>(stages * replicas);
  if ((lc.holds && lc.holds->size() != workers) || (lc.live && lc.live->size() != workers))
    return invalid_argument("a local pipeline's live-recovery holds and states are one per worker");
  // pipes[r][s]: stage s of replica r; groups[s][r]: replica r of stage s's all-reduce group.
  std::vector<std::vector<std::unique_ptr<collectives::Transport>>> pipes, groups;
  for (int r = 0; r < replicas; ++r) pipes.push_back(collectives::make_inproc_group(stages));
  for (int s = 0; s < stages; ++s) groups.push_back(collectives::make_inproc_group(replicas));
  const size_t n = static_cast<size_t>(stages * replicas);
  std::vector<Expected<StageResult>> results(n, Expected<StageResult>(internal_error("not run")));
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r)
    for (int s = 0; s < stages; ++s)
      threads.emplace_back([&, r, s] {
        std::unique_ptr<collectives::Communicator> comm, pipe;
        if (replicas > 1) comm = std::make_unique<collectives::Communicator>(std::move(groups[s][r]));
        if (stages > 1) pipe = std::make_unique<collectives::Communicator>(std::move(pipes[r][s]));
        StageComms c;
        c.pipe = pipe ? &pipe->transport() : nullptr;
        c.replicas = comm.get();
        c.timeout = timeout;
        c.cancel = lc.cancel;
        const size_t w = static_cast<size_t>(r * stages + s);
        if (lc.holds) c.hold = &(*lc.holds)[w];
        c.mirror_distance = lc.mirror_distance;
        c.mirror_every = lc.mirror_every;
        StageCheckpoints ck;
        if (lc.every > 0) {
          ck.every = lc.every;
          ck.write = [&, r](const StageSnapshot& snap) -> Status {
            if (r != 0) return {};  // the replicas of a stage hold the same parameters
            return write_stage_checkpoint(snap, "local", lc.dir, pipe.get(), timeout, lc.commit);
          };
        }
        if (lc.live && (*lc.live)[w]) {
          ck.resume = [&, w](size_t, size_t, size_t) -> Expected<std::optional<checkpoint::TrainingState>> {
            return std::move((*lc.live)[w]);
          };
        } else if (lc.resume) {
          ck.resume = [&, s](size_t total, size_t begin, size_t end) -> Expected<std::optional<checkpoint::TrainingState>> {
            auto state = checkpoint::load_range(*lc.resume, total, begin, end, s);
            if (!state.ok()) return state.status();
            return std::optional<checkpoint::TrainingState>(std::move(*state));
          };
        }
        const bool reporter = r == 0 && s == stages - 1;
        results[static_cast<size_t>(r * stages + s)] =
            train_stage(o, po, train, test, c, reporter ? progress : ProgressFn{}, ck);
      });
  for (auto& t : threads) t.join();
  // The root cause first: a stage that failed on its own, not one told by a neighbour's abort.
  int first = -1;
  for (size_t i = 0; i < n && first < 0; ++i)
    if (!results[i].ok() && results[i].status().message().find("aborted") == std::string::npos) first = static_cast<int>(i);
  for (size_t i = 0; i < n && first < 0; ++i)
    if (!results[i].ok()) first = static_cast<int>(i);
  if (first >= 0)
    return results[static_cast<size_t>(first)].status().with_context("stage " + std::to_string(first % stages) +
                                                                      " of replica " + std::to_string(first / stages));
  LocalPipelineResult out;
  out.train = results[static_cast<size_t>(stages - 1)]->train;
  for (int s = 0; s < stages; ++s) {
    StageResult& sr = *results[static_cast<size_t>(s)];
    out.stages.push_back(sr.report);
    out.params.insert(out.params.end(), sr.params.begin(), sr.params.end());
  }
  return out;
}

}  // namespace troupe::pipeline
