#include "trainers/sync/replica_results.h"

#include <memory>

#include "trainers/setup/model_file.h"

namespace troupe {
namespace {

// --save of a --shard parameters replica: each layer (unit) all-gathered in turn by every replica
// (collective), written by the one that `writes` and given back, so the model is never whole in
// any replica. A failed write is returned after the gathers, so the others are not left waiting.
Status save_layer_by_layer(ShardedState& zero, const std::vector<GradBucket>& units, const ParameterSpace& space,
                           const std::string& path, DType dtype, const std::map<std::string, std::string>& metadata,
                           bool writes) {
  std::unique_ptr<ModelWriter> writer;
  Status failed;
  if (writes) {
    auto w = ModelWriter::create(path, space, dtype, metadata);
    if (w.ok()) writer = std::move(*w); else failed = w.status();
  }
  for (size_t i = 0; i < units.size(); ++i) {
    TROUPE_RETURN_IF_ERROR(zero.gather_unit(i, false).with_context("gathering layer " + std::to_string(i) + " to save it"));
    if (writer && failed.ok()) failed = writer->write_range(units[i].offset, zero.params() + units[i].offset, units[i].count);
    zero.release_unit(i);
  }
  if (writer && failed.ok()) failed = writer->commit();
  return failed;
}

}  // namespace

Expected<SplitScore> score_replicas(Trainer& trainer, const GradientSync& sync, const Dataset& data,
                                    const Replica& replica) {
  const int rank = replica.comm ? replica.comm->rank() : 0, world = replica.comm ? replica.comm->size() : 1;
  const int64_t first = data.count * rank / world, end = data.count * (rank + 1) / world;
  auto mine = sync.layered() ? sync.layered()->evaluate(data, first, end, (data.count + world - 1) / world)
                             : evaluate_rows(trainer, sync.params(), data, first, end);
  if (!mine.ok()) return mine.status();
  return replicas_score(*mine, data.count, replica.comm, replica.timeout);
}

Status save_replica_model(ReplicaState& state, const ParameterSpace& space, const std::string& path, DType dtype,
                          const std::map<std::string, std::string>& metadata, int rank, bool whole) {
  if (state.layered() && !whole)  // never whole: every replica gathers layer by layer, rank 0 writes each
    return save_layer_by_layer(*state.zero(), state.units(), space, path, dtype, metadata, rank == 0);
  if (rank != 0) return {};
  return save_model(path, space, state.whole_params().data(), dtype, metadata);
}

}  // namespace troupe
