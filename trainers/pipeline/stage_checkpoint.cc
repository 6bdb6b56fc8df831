#include "trainers/pipeline/stage_checkpoint.h"

#include "trainers/checkpoint/collective_write.h"

namespace troupe::pipeline {

Status write_stage_checkpoint(const StageSnapshot& snap, const std::string& tag, const std::string& dir,
                              collectives::Communicator* pipe, std::chrono::milliseconds timeout,
                              const checkpoint::CommitFn& commit) {
  checkpoint::ShardData d;
  d.header.tag = tag;
  d.header.step = snap.step;
  d.header.epoch = snap.epoch;
  d.header.epoch_step = snap.epoch_step;
  d.header.total_floats = snap.total;
  d.header.begin = snap.begin;
  d.header.end = snap.end;
  d.params.assign(snap.params, snap.params + (snap.end - snap.begin));
  d.optimizer = snap.optimizer->save_state(0, snap.end - snap.begin);
  const int last = pipe ? pipe->size() - 1 : 0;
  return checkpoint::write_group_shard(std::move(d), dir, pipe, timeout, last, commit);
}

}  // namespace troupe::pipeline
