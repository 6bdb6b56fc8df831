// Where a worker's training batches come from, epoch by epoch: the seam between the training loops
// (sync replicas, async and central workers) and the data layer.
//
//   SliceFeed   this replica's rows of every global batch of the epoch's seeded shuffle (what a
//               job of one process, and the equivalence tests, train on); nothing is recorded.
//   LedgerFeed  (trainers/job/ledger_feed.h) the shards the worker claims from the job's shard
//               ledger in the GCS, batched ahead by the input pipeline, progress reported back.
//
// A loop calls begin_epoch(e), then next() until it returns false (or it has the epoch's steps),
// calling trained() after each batch's update was applied (so accounting never runs ahead of the
// parameters), then end_epoch().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/schema.h"
#include "data/readers/fashion_mnist.h"

namespace troupe {

// Where rows of a batch came from: `rows` examples of shard `shard` of epoch `epoch`'s plan,
// starting at example `offset` of that shard. A LedgerFeed batch spans one shard or, at a shard's
// end, the next ones too (in order). Sent as is with every parameter-server push
// (trainers/ps/ps_wire.h), so its layout is part of that protocol.
struct DataSpan {
  int32_t epoch = 0;
  int32_t shard = 0;
  int64_t offset = 0;
  int64_t rows = 0;
  bool operator==(const DataSpan& o) const {
    return epoch == o.epoch && shard == o.shard && offset == o.offset && rows == o.rows;
  }
};
static_assert(sizeof(DataSpan) == 24, "DataSpan is sent on the parameter-server wire");
using DataTag = std::vector<DataSpan>;
std::string describe(const DataTag& tag);  // "epoch 2 shard 5 [64, 96) + shard 6 [0, 32)"

// A training example's inputs transformed in place (augmentation, Trainer::transform_example),
// given the epoch and the example's index in the dataset.
using ExampleTransform = std::function<void(int epoch, int64_t example, float* inputs)>;

// The seed of example `example`'s transform in epoch `epoch` of a job seeded `seed`.
uint64_t example_seed(uint64_t seed, int epoch, int64_t example);

// The rows a data tag names, gathered again (BatchFeed::rows_of): their inputs and their target as
// the dataset holds it — classes (target_width per row) or values — so a recomputed batch is the
// trained one, row for row, for any model (one class per example, token windows, regression).
struct GatheredRows {
  std::vector<float> inputs;    // rows x features
  std::vector<int32_t> labels;  // rows x width, when the dataset classifies
  std::vector<float> targets;   // rows x width, when it holds values
  int64_t rows = 0;
  int64_t width = 1;            // the dataset's target_width
  // The rows as a Batch of `features` inputs each (no fields bound: the device binds its own).
  Batch batch(int64_t features) const {
    Batch b{inputs.data(), labels.empty() ? nullptr : labels.data(), rows, features};
    b.targets = targets.empty() ? nullptr : targets.data();
    b.target_width = width;
    return b;
  }
};

class BatchFeed {
 public:
  virtual ~BatchFeed() = default;
  // Training batches' examples are transformed by `t` from the next begin_epoch() on (also the
  // rows rows_of() gathers); empty: none.
  virtual void set_transform(ExampleTransform t) { transform_ = std::move(t); }
  // Prepares epoch `epoch` (1-based).
  virtual Status begin_epoch(int epoch) = 0;
  // The next begin_epoch()'s first `batches` batches will only be passed over (trained() called
  // without training them: a resumed loop's steps done before it started). A feed may deliver them
  // hollow — their size and accounting, no rows — to read nothing for them; by default it reads.
  virtual void pass_over(int64_t batches) { (void)batches; }
  // The next batch of the epoch in *out (its pointers stay valid until the next call); false at
  // the end of the epoch.
  virtual Expected<bool> next(Batch* out) = 0;
  // The batch last returned by next() was trained on and its update applied.
  virtual Status trained() { return {}; }
  // The loop is done with the epoch (it may stop before next() returned false: a sync job trains
  // whole global batches only, like `troupe train`; what is left over counts as seen).
  virtual Status end_epoch() { return {}; }
  // Total milliseconds next() waited for data so far (the data-wait metric).
  virtual double data_wait_ms() const { return 0; }
  // Examples of the epoch begin_epoch() started that were trained before this feed took it up (by
  // other workers, or by a failed predecessor whose work this one finishes): where the epoch's
  // progress starts. 0 for feeds that always start an epoch at its beginning.
  virtual int64_t examples_done_at_start() const { return 0; }
  // Where the rows of the batch last returned by next() came from; empty when the feed does not
  // know (SliceFeed: nothing is accounted).
  virtual DataTag position() const { return {}; }
  // The rows a tag of this feed names (position()'s, of any epoch), into *out: to recompute a push
  // a restored parameter server lost (trainers/ps/ps_client.h). invalid_argument from a feed that
  // does not tag its batches.
  virtual Status rows_of(const DataTag& tag, GatheredRows* out) {
    (void)out;
    return invalid_argument("this data feed does not tag its batches, so it cannot gather " + describe(tag));
  }

 protected:
  ExampleTransform transform_;
};

// Replica `rank` of `replicas`: rows [rank * b, (rank + 1) * b) of every global batch of
// `global_batch` examples (b = global_batch / replicas) of epoch_permutation(seed, epoch); the last
// partial global batch is dropped, or with `pad` (--last-batch pad) its rows are the last step's:
// this replica's part of them, which may be short or empty (next() then returns false). The dataset
// must outlive the feed.
class SliceFeed final : public BatchFeed {
 public:
  SliceFeed(const Dataset& data, uint64_t seed, int64_t global_batch, int rank, int replicas, bool pad = false);
  Status begin_epoch(int epoch) override;
  Expected<bool> next(Batch* out) override;

  int64_t steps_per_epoch() const { return steps_; }

 private:
  const Dataset& data_;
  uint64_t seed_;
  int64_t global_batch_, local_batch_, steps_;
  bool pad_;
  int rank_;
  std::vector<int32_t> order_;
  int64_t step_ = 0;
  int epoch_ = 0;
  std::vector<float> x_;
  std::vector<int32_t> y_;
  std::vector<float> t_;
  DataSpec spec_;
  BatchFields fields_;
};

}  // namespace troupe
