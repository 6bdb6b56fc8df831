#include "trainers/sync/replica_checks.h"

#include <cstdio>

#include <xxhash.h>

#include "trainers/checkpoint/collective_write.h"

namespace troupe {
namespace {

// Writes this replica's shard of the checkpoint of `step` (slice rank of world) and, once every
// replica's is durable, rank 0 commits the manifest. See Replica::checkpoints.
Status write_checkpoint(ReplicaState& state, size_t n, const Replica& replica, int64_t step, int epoch,
                        int64_t epoch_step) {
  const checkpoint::ReplicaPoint at{replica.checkpoints.tag, step, epoch, epoch_step};
  auto fill = [&](size_t begin, size_t end, checkpoint::ShardData* d) -> Status {
    auto p = state.slice_params(begin, end);
    if (!p.ok()) return p.status();
    d->params = std::move(*p);
    auto st = state.slice_state(begin, end);
    if (!st.ok()) return st.status();
    d->optimizer = std::move(*st);
    return {};
  };
  return checkpoint::write_replica_checkpoint(at, n, fill, replica.checkpoints.dir, replica.comm, replica.timeout,
                                              replica.checkpoints.commit);
}

}  // namespace

Status compare_checksums(const std::vector<float>& params, const Replica& replica, int64_t step) {
  const uint64_t mine = XXH64(params.data(), params.size() * sizeof(float), 0);
  std::vector<uint64_t> all(replica.comm->size());
  collectives::CollectiveOptions co;
  co.timeout = replica.timeout;
  // 8 bytes per replica gathered as two opaque f32 words (all-gather moves bytes, no arithmetic).
  TROUPE_RETURN_IF_ERROR(replica.comm->allgather(&mine, all.data(), 2, DType::f32, co)
                             .with_context("comparing parameter checksums at step " + std::to_string(step)));
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) {
      char text[80];
      std::snprintf(text, sizeof text, "%016llx differs from rank 0's %016llx", static_cast<unsigned long long>(all[r]),
                    static_cast<unsigned long long>(all[0]));
      return internal_error("replicas diverged: at step " + std::to_string(step) + " replica " + std::to_string(r) +
                            "'s parameter checksum " + text + "; every replica must start from the same seed and "
                            "apply the same updates");
    }
  return {};
}

Status after_step_checks(ReplicaState& state, const Replica& replica, size_t total, int64_t step, int epoch,
                         int64_t epoch_step, const std::string& where) {
  if (replica.comm && !state.layered() && replica.checksum_every > 0 && step % replica.checksum_every == 0)
    TROUPE_RETURN_IF_ERROR(compare_checksums(state.whole_params(), replica, step).with_context(where));
  if (replica.checkpoints.every > 0 && step % replica.checkpoints.every == 0)
    TROUPE_RETURN_IF_ERROR(write_checkpoint(state, total, replica, step, epoch, epoch_step).with_context(where));
  return {};
}

}  // namespace troupe
