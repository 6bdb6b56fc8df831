// Sharded data parallelism for the sync strategy (`--shard optimizer|gradients`: ZeRO stages 1 and
// 2, FSDP's SHARD_GRAD_OP): what one replica holds beyond the full parameters, and the collectives
// that replace the gradient all-reduce.
//
// Ownership follows the gradient buckets (trainers/sync/grad_buckets.h): bucket [offset, offset + count)
// is cut into `size` chunks of ceil(count / size) floats and rank r owns the r-th (the last ranks'
// may be shorter or empty). So a bucket, once its blocks are final, is reduce-scattered at once —
// each rank receiving the average of its own chunk — while backward goes on (the comm thread of
// GradBucketSync calls reduce_bucket). A rank keeps optimizer state for its chunks only and updates
// only its chunks of the parameters; then every bucket's chunks are all-gathered so every replica
// holds the whole updated parameters again before the next forward.
//
//   stage optimizer: the gradient buffer stays whole (the trainer writes it as always); the
//                    optimizer state is 1/N.       bytes per parameter (Adam): 4 + 4 + 8/N
//   stage gradients: as above, and each bucket's pages outside the rank's chunk go back to the
//                    kernel as soon as it is reduced (PageBuffer): the full gradient is never
//                    resident beyond the buckets in flight.            4 + 4/N + 8/N
//   stage parameters: the chunks are the model's layers' ranges (Trainer::layers()), and the
//                    parameters too live in a page buffer of which a rank keeps only its chunks:
//                    a layer is all-gathered (gather_unit) just before its forward and again
//                    before its backward and given back after (release_unit); the layer-by-layer
//                    step is trainers/sharded/layered_step.h.                 16/N + the gathered layers
//
// Every rank issues the same collectives in the same order (the buckets' order, then the step's
// scalars, then the gathers), so a rank that dies or falls out of step makes the others fail by the
// collective's deadline, naming it. Reductions and updates are elementwise over the same floats
// as the unsharded replica's, so a sharded job ends where plain sync does, to the rounding of the
// reduction's order.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/status.h"
#include "trainers/api/trainer.h"
#include "trainers/sync/grad_buckets.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sharded/page_buffer.h"

namespace troupe {

// `--shard`: what a sync replica keeps only its 1/N of.
enum class ShardStage : uint8_t { none, optimizer, gradients, parameters };
const char* shard_stage_name(ShardStage stage);                // "none", "optimizer", ...
bool parse_shard_stage(const std::string& name, ShardStage* out);  // false for another name

// The chunk of one bucket a rank owns.
struct OwnedChunk {
  size_t bucket_offset = 0, bucket_count = 0;  // the bucket, in floats of the flat layout
  size_t chunk = 0;                            // floats per rank: ceil(bucket_count / size)
  size_t begin = 0, end = 0;                   // this rank's, clipped to the bucket (may be empty)
};
std::vector<OwnedChunk> plan_owned_chunks(const std::vector<GradBucket>& buckets, int rank, int size);

// What a sharded replica holds, in bytes, and the time its parameter all-gathers took. The gradient
// buffer is measured (resident pages, before each bucket's pages go back); the rest is what it
// allocated.
struct ShardStats {
  int64_t parameters = 0;      // the full parameters (stage parameters: resident, at their peak)
  int64_t gradients_peak = 0;  // the gradient buffer, resident, at its largest
  int64_t optimizer = 0;       // this rank's optimizer state
  int64_t staging = 0;         // the collectives' bucket buffers
  int64_t total() const { return parameters + gradients_peak + optimizer + staging; }
  double gather_seconds = 0;   // in the all-gathers of updated parameters, all steps
  // Stage parameters: in the layers' gathers and reduce-scatters (the comm queue's), all steps.
  double layer_comm_seconds = 0;
};

class ShardedState {
 public:
  struct Options {
    ShardStage stage = ShardStage::optimizer;  // optimizer or gradients
    std::chrono::milliseconds timeout{60000};  // per collective
    DType wire = DType::f32;                   // what reductions travel as (--grad-wire)
    bool measure = false;                      // sample the gradient buffer's resident pages
  };

  // The state of rank comm.rank() of `total` parameters laid out in `buckets` (every replica passes
  // the same). The optimizer's errors (bad settings) as make_optimizer's.
  static Expected<std::unique_ptr<ShardedState>> create(collectives::Communicator& comm,
                                                        const std::vector<GradBucket>& buckets, size_t total,
                                                        const OptimizerOptions& optimizer, const Options& options);

  // The flat gradient buffer (total floats) the trainer writes.
  float* grads() const { return grads_.data(); }

  // Stage parameters: the parameters in the flat layout, of which only this rank's chunks (and the
  // units gathered now) hold values.
  float* params() const { return params_.data(); }
  // This rank's chunks of the seed's initialisation (exactly a whole-buffer one's floats), or of
  // `full` (total floats: a checkpoint's, a model file's).
  void init_params(const ParameterSpace& space, uint64_t seed);
  void load_params(const float* full);
  // This rank's non-empty chunks [begin, end), in flat order (buckets run in backward order); and
  // loading them from their floats one after another in that order (a checkpoint's ranges:
  // checkpoint::load_ranges), parameters or optimizer state.
  std::vector<std::pair<size_t, size_t>> owned_ranges() const;
  void load_owned_params(const float* owned);
  Status load_owned_optimizer(const OptimizerState& owned);
  // Unit i's parameters all-gathered into params() / given back but for this rank's chunk.
  // Collective (every rank, same order). gather_all: every unit, for evaluation and the final
  // parameters (the whole model resident while they last: not counted in stats()'s peak, which is
  // the training steps').
  Status gather_unit(size_t i, bool training = true);
  void release_unit(size_t i);
  Status gather_all();
  void release_all();
  size_t units() const { return chunks_.size(); }

  // Gradients given back: a bucket's pages are prepared (PageBuffer::prepare) while backward is
  // still this many buckets before it (each one of a few MB at most resident early; 2x the step
  // time of plain sync without it, for the page faults of two replicas' threads in one process).
  static constexpr size_t kPrepareAhead = 6;
  // Bucket (unit) `index`'s gradient pages backed now, in one call (PageBuffer::prepare).
  void prepare_bucket(size_t index);
  // Before a step: every gradient reads zero (stage gradients: by returning every page).
  void zero_grads();
  // GradBucketSync::Options::reduce, on its comm thread: reduce-scatters (averages) bucket `index`
  // (its floats at `data`, already weighted) so this rank's chunk holds the average; stage gradients
  // then returns the rest of the bucket's pages.
  Status reduce_bucket(size_t index, float* data, size_t count, const collectives::CollectiveOptions& co);

  // After the buckets: whether every rank's chunks are finite (f16 loss scaling; the same answer on
  // every rank), the chunks scaled, clipped by the global norm (summed over the ranks; the norm
  // before clipping is returned), and updated.
  Expected<bool> all_finite();
  // Stage parameters: whether every rank's chunks of the parameters are finite (agreed).
  Expected<bool> params_finite();
  void scale(float factor);
  Expected<double> clip_grad_norm(float max_norm);
  void step(float* params, float lr);
  // All-gathers every bucket's updated chunks into `params` (total floats), bucket by bucket.
  Status gather(float* params);

  // Checkpoints: the optimizer state of the contiguous range [begin, end) (a checkpoint shard's
  // slice, trainers/checkpoint/), assembled from every rank's chunks. Collective: every rank calls
  // it with its own range. And the other way: this rank's chunks taken from a whole-model state.
  Expected<OptimizerState> optimizer_state(size_t begin, size_t end);
  // Stage parameters: the parameters of [begin, end) assembled the same way.
  Expected<std::vector<float>> param_slice(size_t begin, size_t end);
  Status load_optimizer(const OptimizerState& whole);

  // Live recovery's buddy mirror (trainers/sharded/buddy_mirror.h): the floats rank `rank` of this
  // group owns (its chunks' sizes summed: rank 0's are the most), the optimizer's state vectors per
  // float, and this rank's optimizer state of its chunks one after another in flat order (what
  // load_owned_optimizer takes back).
  size_t owned_floats(int rank) const;
  // The non-empty chunks [begin, end) rank `rank` of a group of `size` would own over the same
  // buckets, in flat order: the layout of a mirror's record taken at another size (mirror_recut.h).
  std::vector<std::pair<size_t, size_t>> owned_ranges_of(int rank, int size) const;
  size_t optimizer_vectors() const { return vectors_; }
  OptimizerState owned_optimizer() const;
  // The same vectors written in place: vector v's owned floats at out + v * owned_floats(rank);
  // returns the float after the last.
  float* copy_owned_optimizer(float* out) const;

  std::string describe() const;  // "adamw(...) on 1/4 of the state (optimizer)"
  int64_t steps() const;
  ShardStats stats() const;

 private:
  ShardedState(collectives::Communicator& comm, const Options& options) : comm_(comm), options_(options) {}
  void note_resident();
  std::vector<size_t> owned_in_flat_order() const;  // indices of the non-empty chunks, by begin
  // Each listed chunk's optimizer state from `from`'s vectors: (chunk index, its first float there).
  Status load_chunk_states(const OptimizerState& from, const std::vector<std::pair<size_t, size_t>>& at);
  // All-gathers unit i's chunks — this rank's from `mine` (its chunk's floats; null: zeros) — into
  // `unit` (the unit's bucket_count floats): in place when the unit divides evenly, else through the
  // staging buffer.
  Status gather_into(size_t i, const float* mine, float* unit);
  // Whether every rank's chunks of `buffer` (the flat layout) are finite, agreed by all ranks.
  Expected<bool> chunks_finite(const float* buffer, const std::string& what);
  // `buffer`'s range of c's unit outside c given back (PageBuffer::release).
  static void release_others(PageBuffer& buffer, const OwnedChunk& c);
  // Every rank's chunk of each unit (from chunk_data(i): chunk floats, null for zeros) all-gathered
  // unit by unit, and the part inside [begin, end) copied to out[0, end - begin).
  Status assemble(size_t begin, size_t end, const std::function<const float*(size_t unit)>& chunk_data, float* out,
                  const std::string& what);
  collectives::CollectiveOptions collective(uint64_t tag) const;

  collectives::Communicator& comm_;
  Options options_;
  size_t total_ = 0;
  std::vector<OwnedChunk> chunks_;                     // per bucket
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // per bucket: its chunk's state (null when empty)
  // Per bucket: the state blocks' ranges in its chunk, relative to it (no norm, no clipping).
  std::vector<FlatRanges> state_in_chunk_;
  const FlatRanges& state_of(size_t chunk) const {
    static const FlatRanges kNone;
    return chunk < state_in_chunk_.size() ? state_in_chunk_[chunk] : kNone;
  }
  PageBuffer grads_;
  PageBuffer params_;  // stage parameters only
  std::vector<float> staging_;  // the largest uneven unit's floats padded to chunk x size
  std::vector<float> piece_;    // one chunk
  int64_t optimizer_bytes_ = 0;
  size_t vectors_ = 0;  // the optimizer's state vectors (per float of a chunk)
  double gather_seconds_ = 0;
  std::atomic<int64_t> resident_peak_{0};
  int64_t params_peak_ = 0;
};

}  // namespace troupe
