#include "trainers/sync/trainer_driver.h"

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include <xxhash.h>

#include <spdlog/spdlog.h>

#include "kernels/cpu/blas_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/ops.h"
#include "trainers/checkpoint/collective_write.h"
#include "trainers/epoch_report.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/local_trainer.h"
#include "trainers/optim/lr_schedule.h"
#include "trainers/sync/micro_batches.h"
#include "trainers/model_file.h"
#include "trainers/optim/loss_scale.h"
#include "trainers/optim/optimizer.h"
#include "trainers/optim/param_init.h"
#include "trainers/sharded/layered_step.h"
#include "trainers/trainer_setup.h"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

// Test accuracy and loss over all replicas: each evaluates its slice of the rows, then one
// all-reduce sums them.
Expected<SplitScore> evaluate_split(Trainer& trainer, const Parameters& params, const Dataset& data,
                                    const Replica& replica) {
  const int rank = replica.comm ? replica.comm->rank() : 0, world = replica.comm ? replica.comm->size() : 1;
  auto mine = evaluate_rows(trainer, params, data, data.count * rank / world, data.count * (rank + 1) / world);
  if (!mine.ok()) return mine.status();
  return replicas_score(*mine, data.count, replica.comm, replica.timeout);
}

// evaluate_split for --shard parameters: each replica its slice, layer by layer (layered_step.h).
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

Expected<SplitScore> evaluate_layered(LayeredStep& step, const Dataset& data, const Replica& replica) {
  const int rank = replica.comm->rank(), world = replica.comm->size();
  auto mine = step.evaluate(data, data.count * rank / world, data.count * (rank + 1) / world,
                            (data.count + world - 1) / world);
  if (!mine.ok()) return mine.status();
  return replicas_score(*mine, data.count, replica.comm, replica.timeout);
}

// Every replica's parameter checksum; an error naming the first replica that differs from rank 0.
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

// Writes this replica's shard of the checkpoint of `step` (slice rank of world) and, once every
// replica's is durable, rank 0 commits the manifest. See Replica::checkpoints.
// `state` gives the optimizer state of a slice (a sharded replica's assembles it from every rank's).
using SliceState = std::function<Expected<OptimizerState>(size_t begin, size_t end)>;
// `params` gives the parameters of a slice (stage parameters: assembled from every rank's chunks).
using SliceParams = std::function<Expected<std::vector<float>>(size_t begin, size_t end)>;
Status write_checkpoint(const SliceParams& params, size_t n, const SliceState& state, const Replica& replica,
                        int64_t step, int epoch, int64_t epoch_step) {
  const checkpoint::ReplicaPoint at{replica.checkpoints.tag, step, epoch, epoch_step};
  auto fill = [&](size_t begin, size_t end, checkpoint::ShardData* d) -> Status {
    auto p = params(begin, end);
    if (!p.ok()) return p.status();
    d->params = std::move(*p);
    auto st = state(begin, end);
    if (!st.ok()) return st.status();
    d->optimizer = std::move(*st);
    return {};
  };
  return checkpoint::write_replica_checkpoint(at, n, fill, replica.checkpoints.dir, replica.comm, replica.timeout,
                                              replica.checkpoints.commit);
}

// --last-batch pad: a copy of one training row, which a replica without rows at an epoch's short
// last step trains with zero weight, so it still takes that step's collectives and adds nothing.
class PaddingRow {
 public:
  explicit PaddingRow(DataSpec spec) : spec_(std::move(spec)) {}
  void keep(const Batch& b) {
    features_ = b.features;
    width_ = b.target_width;
    inputs_.assign(b.inputs, b.inputs + b.features);
    if (b.labels) labels_.assign(b.labels, b.labels + b.target_width); else labels_.clear();
    if (b.targets) targets_.assign(b.targets, b.targets + b.target_width); else targets_.clear();
  }
  bool empty() const { return inputs_.empty(); }
  Batch batch() {
    Batch b{inputs_.data(), labels_.empty() ? nullptr : labels_.data(), 1, features_};
    b.targets = targets_.empty() ? nullptr : targets_.data();
    b.target_width = width_;
    fields_.bind(spec_, &b);
    return b;
  }

 private:
  DataSpec spec_;
  int64_t features_ = 0, width_ = 1;
  std::vector<float> inputs_, targets_;
  std::vector<int32_t> labels_;
  BatchFields fields_;
};

}  // namespace

void init_parameters(const ParameterSpace& space, uint64_t seed, float* params) {
  init_parameter_range(space, seed, 0, space.size(), params);
}

Expected<JobConfig> trainer_config(const TrainOptions& o) {
  auto config = JobConfig::parse(o.trainer_args);
  if (!config.ok()) return config.status().with_context("--trainer-arg");
  if (!config->has("hidden")) {
    std::string hidden;
    for (int h : o.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
    config->set("hidden", hidden);
  }
  return config;
}

Expected<TrainResult> train_with_trainer(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                         const ProgressFn& progress, std::vector<float>* final_params) {
  return train_replica(o, train, test, Replica{}, progress, final_params);
}

// Without buckets: the gradients and the two slots after them in one all-reduce, or in two when the
// gradients travel compressed (the slots stay f32).
static Status allreduce_unbucketed(float* all, size_t count, const Replica& replica,
                                   collectives::CollectiveOptions co) {
  const auto avg = collectives::ReduceOp::avg;
  if (replica.grad_wire == DType::f32) return replica.comm->allreduce(all, all, count, DType::f32, avg, co);
  const size_t n = count - 2;
  co.wire = replica.grad_wire;
  TROUPE_RETURN_IF_ERROR(replica.comm->allreduce(all, all, n, DType::f32, avg, co));
  co.wire = DType::f32;
  return replica.comm->allreduce(all + n, all + n, 2, DType::f32, avg, co);
}

Expected<TrainResult> train_replica(const TrainOptions& o, const Dataset& train, const Dataset& test,
                                    const Replica& replica, const ProgressFn& progress,
                                    std::vector<float>* final_params) {
  TROUPE_RETURN_IF_ERROR(o.validate());
  const int rank = replica.comm ? replica.comm->rank() : 0, world = replica.comm ? replica.comm->size() : 1;
  const bool elastic = replica.local_rows > 0;
  if (elastic && (replica.local_rows > o.batch_size || replica.local_rows % o.accumulate != 0)) {
    return invalid_argument("an elastic replica's " + std::to_string(replica.local_rows) + " rows of the global batch " +
                            std::to_string(o.batch_size) + " must be at most the batch, and divide into --accumulate " +
                            std::to_string(o.accumulate) + " micro-batches");
  }
  if (!elastic && o.batch_size % (world * o.accumulate) != 0) {
    const std::string parts = o.accumulate > 1 ? std::to_string(world) + " replicas x " +
                                                     std::to_string(o.accumulate) + " micro-batches"
                                               : std::to_string(world) + " replicas";
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + parts + "; use a multiple of " + std::to_string(world * o.accumulate));
  }
  const bool sharded = replica.comm && replica.shard != ShardStage::none;
  const bool layered = sharded && replica.shard == ShardStage::parameters;  // layer by layer (layered_step.h)
  if (sharded && replica.shard != ShardStage::optimizer && o.accumulate > 1)
    return invalid_argument("--shard " + std::string(shard_stage_name(replica.shard)) + " with --accumulate " +
                            std::to_string(o.accumulate) + " would hold every micro-batch's full gradient; use "
                            "--shard optimizer with --accumulate");
  const int local_batch = elastic ? replica.local_rows : o.batch_size / world;
  // This replica's share of the global batch relative to an even one (1 unless elastic and uneven).
  const float weight = elastic ? static_cast<float>(static_cast<double>(local_batch) * world / o.batch_size) : 1.0f;
  // Mini-batches are full: the last partial batch of an epoch is dropped (its examples are seen in
  // other epochs, since every epoch has its own permutation), or with --last-batch pad trained in
  // one more, short step (below: every replica takes it, weighted by the rows it has).
  const bool pad = o.pads_last_batch();
  const int64_t steps_per_epoch = epoch_steps(train.count, o.batch_size, pad);
  const int64_t last_rows = step_examples(train.count, o.batch_size, pad, steps_per_epoch - 1);
  const bool short_last = last_rows < o.batch_size;  // the epoch ends in a short (padded) step
  if (train.count < o.batch_size) {
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(train.count) + " training examples");
  }
  auto setup = set_up_trainer(o, train.spec(), rank, world);
  if (!setup.ok()) return setup.status();
  Trainer& trainer = *setup->trainer;
  const ParameterSpace& space = setup->space;
  const std::string& where = setup->where;

  kernels::cpu::set_blas_threads(o.cpu_threads);
  kernels::cpu::ScopedFlushDenormals flush_denormals;  // see kernels/cpu/denormals.h

  OptimizerOptions oo = optimizer_options(o);
  oo.decay_ranges = matrix_ranges(space);  // --weight-decay-params matrices
  oo.decay_ranges_set = true;
  // One optimizer over every parameter, or (sharded) the state of this replica's chunks only.
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<ShardedState> zero;
  std::vector<GradBucket> bucket_plan = plan_grad_buckets(space.blocks(), replica.bucket_bytes);
  std::vector<LayerInfo> layer_list;
  if (layered) {  // the units are the model's layers
    LayerModel* layers = trainer.layers();
    if (!layers)
      return invalid_argument("--shard parameters gathers the model layer by layer, and " + where + " does not "
                              "split into layers (Trainer::layers() is null); use --shard gradients");
    if (train.spec().classes <= 0 && !layers->scores_values())
      return invalid_argument("--shard parameters scores the last layer's output with the layers' loss, and " + where +
                              "'s layers score class targets only (LayerModel::scores_values()); this dataset's "
                              "target holds values: use --shard gradients");
    if (!layers->computes_in(o.precision))
      return invalid_argument("--shard parameters runs " + where + " layer by layer, and its layers compute in f32 "
                              "only (LayerModel::computes_in); use --shard gradients with --precision " +
                              std::string(dtype_name(o.precision)));
    layer_list = layers->layer_infos();
    auto units = layer_units(layer_list, space.size());
    if (!units.ok()) return units.status().with_context(where);
    bucket_plan = std::move(*units);
  }
  if (sharded) {
    ShardedState::Options so;
    so.stage = replica.shard;
    so.timeout = replica.timeout;
    so.wire = replica.grad_wire;
    so.measure = replica.shard_stats != nullptr;
    auto made = ShardedState::create(*replica.comm, bucket_plan, space.size(), oo, so);
    if (!made.ok()) return made.status();
    zero = std::move(*made);
  } else {
    auto made = make_optimizer(oo, space.size());
    if (!made.ok()) return made.status();
    opt = std::move(*made);
  }

  LrSchedule schedule = LrSchedule::constant;
  parse_lr_schedule(o.lr_schedule, &schedule);  // validated above
  const int64_t total_steps =
      o.max_steps > 0 ? std::min<int64_t>(o.max_steps, steps_per_epoch * o.epochs) : steps_per_epoch * o.epochs;
  // Two slots after the gradients carry this replica's loss and correct count through the same
  // all-reduce, so a step costs one collective.
  // (sharded: the gradients live in the ShardedState's page buffer, the slots apart)
  // (--shard parameters: the parameters too, of which this replica holds its chunks of each layer)
  // (plain sync over shared memory with an arena that large: the gradients and slots live in it,
  // so every all-reduce reads and writes them in place, no copy in or out: Communicator::
  // shared_buffer; the job's workers ask for the arena when /dev/shm has room, job_worker.cc)
  const size_t grad_floats = zero ? 0 : space.size() + 2;
  float* const arena =
      grad_floats && replica.comm ? static_cast<float*>(replica.comm->shared_buffer(grad_floats * sizeof(float))) : nullptr;
  std::vector<float> params(layered ? 0 : space.size()), grads(arena ? 0 : grad_floats);
  float* const grad_store = arena ? arena : grads.data();
  float zero_slots[2] = {0, 0};
  float* const grad = zero ? zero->grads() : grad_store;
  float* const slots = zero ? zero_slots : grad_store + space.size();
  float* const param_data = layered ? zero->params() : params.data();
  if (layered) zero->init_params(space, o.seed); else init_parameters(space, o.seed, params.data());
  if (rank == 0 && !o.save_path.empty())  // a --save that cannot be written fails now, not after training
    TROUPE_RETURN_IF_ERROR(check_save_target(o.save_path));
  if (!o.init_from.empty() && !replica.resume) {  // every replica loads the same file: identical start
    if (layered) {  // read whole, this replica's chunks kept
      std::vector<float> whole(space.size());
      init_parameters(space, o.seed, whole.data());  // --init-partial: the blocks the file lacks
      TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, space, o.model, o.init_partial, whole.data()));
      zero->load_params(whole.data());
    } else {
      TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, space, o.model, o.init_partial, params.data()));
    }
    if (rank == 0) spdlog::info("parameters from {}{}", o.init_from, o.init_partial ? " (the blocks it has)" : "");
  }
  int64_t step = 0;           // steps done
  int first_epoch = 1;        // a resumed job goes on in the checkpoint's epoch
  int64_t skip_steps = 0;     //   after the steps of it already done
  if (replica.resume) {
    const checkpoint::TrainingState& r = *replica.resume;
    const std::string restoring = "restoring the checkpoint of step " + std::to_string(r.step);
    if (zero && replica.resume_ranges) {  // this replica's ranges only, never the whole checkpoint
      std::vector<checkpoint::Range> owned;
      for (const auto& [begin, end] : zero->owned_ranges()) owned.push_back({begin, end});
      auto mine = replica.resume_ranges(space.size(), layered ? owned : std::vector<checkpoint::Range>{{0, space.size()}},
                                        owned);
      if (!mine.ok()) return mine.status().with_context(restoring);
      TROUPE_RETURN_IF_ERROR(zero->load_owned_optimizer(mine->optimizer).with_context(restoring));
      if (layered) {
        zero->load_owned_params(mine->params.data());
      } else {  // into the buffer param_data points at
        std::copy(mine->params.begin(), mine->params.end(), params.begin());
      }
    } else {
      if (r.params.size() != space.size()) {
        return invalid_argument("the checkpoint holds " + std::to_string(r.params.size()) + " parameters; " + where +
                                " has " + std::to_string(space.size()) + " (another model or trainer settings?)");
      }
      TROUPE_RETURN_IF_ERROR((zero ? zero->load_optimizer(r.optimizer) : opt->load_state(r.optimizer, 0))
                                 .with_context(restoring));
      if (layered) zero->load_params(r.params.data()); else params = r.params;
    }
    step = r.step;
    const checkpoint::ResumeAt at = checkpoint::resume_at(r, steps_per_epoch);
    first_epoch = at.epoch;
    skip_steps = at.skip_steps;
    spdlog::info("resuming from the checkpoint of step {}: epoch {} after {} of its steps", step, first_epoch,
                 skip_steps);
  }
  TROUPE_RETURN_IF_ERROR(replica.checkpoints.check());
  const Parameters param_view(param_data, space.size());
  std::unique_ptr<GradBucketSync> buckets;  // Replica::bucket_bytes: all-reduce overlapping backward
  std::unique_ptr<LayeredStep> layered_step;  // --shard parameters: its own collectives, layer by layer
  if (layered)
    layered_step = std::make_unique<LayeredStep>(*trainer.layers(), layer_list, bucket_plan, *zero, replica.timeout);
  if (replica.comm && !layered && (replica.bucket_bytes > 0 || zero)) {  // sharded: by buckets (0: one)
    GradBucketSync::Options bo{replica.bucket_bytes, replica.timeout, replica.grad_wire, {}, 0};
    if (zero) {
      ShardedState* z = zero.get();
      bo.reduce = [z](size_t b, float* data, size_t count, const collectives::CollectiveOptions& co) {
        return z->reduce_bucket(b, data, count, co);
      };
      // Gradients: backward may run at most two complete buckets ahead of the reductions.
      if (replica.shard == ShardStage::gradients) bo.max_ready_ahead = 2;
    }
    buckets = std::make_unique<GradBucketSync>(*replica.comm, space, bo);
  }
  Gradients grad_view(grad, space.size(), buckets.get());
  TrainResult result;
  result.model = setup->model;
  result.device = "cpu";
  result.precision = dtype_name(o.precision);
  const bool scaled = o.precision == DType::f16;  // dynamic loss scaling (trainers/optim/loss_scale.h)
  LossScaler scaler(o.loss_scale_options());
  spdlog::info("training {} on cpu with {} ({} steps/epoch, OpenBLAS {} kernels, {} thread(s))", result.model,
               zero ? zero->describe() : opt->describe(), steps_per_epoch, kernels::cpu::blas_corename(), o.cpu_threads);

  const SliceState slice_state = [&](size_t begin, size_t end) -> Expected<OptimizerState> {
    if (zero) return zero->optimizer_state(begin, end);
    return opt->save_state(begin, end);
  };
  const SliceParams slice_params = [&](size_t begin, size_t end) -> Expected<std::vector<float>> {
    if (layered) return zero->param_slice(begin, end);
    return std::vector<float>(params.begin() + static_cast<std::ptrdiff_t>(begin),
                              params.begin() + static_cast<std::ptrdiff_t>(end));
  };
  const int64_t features = train.features();
  SliceFeed slices(train, o.seed, o.batch_size, rank, world, pad);
  BatchFeed& feed = replica.feed ? *replica.feed : slices;
  // Augmentation: the trainer's transform of each training example, in the feed (its threads).
  const ScopedTransform augment(feed, trainer, o.seed);
  PaddingRow padding(train.spec());
  std::vector<float> micro_grads;  // one micro-batch's gradients (--accumulate)
  collectives::CollectiveOptions sync;
  sync.timeout = replica.timeout;
  const auto job_start = Clock::now();
  double train_seconds = 0;
  bool stop = o.max_steps > 0 && step >= o.max_steps;
  bool counted = true;  // the trainer reports correct predictions

  for (int epoch = first_epoch; epoch <= o.epochs && !stop; ++epoch) {
    const auto epoch_start = Clock::now();
    TROUPE_RETURN_IF_ERROR(feed.begin_epoch(epoch).with_context("data of epoch " + std::to_string(epoch)));
    EpochTally tally;
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      if (replica.cancel && replica.cancel->load()) {
        return unavailable("stopped at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1));
      }
      if (replica.steps)  // step timeline: data wait
        replica.steps->begin(epoch, step + 1, replica.comm ? replica.comm->payload_bytes() : 0);
      Batch batch;
      auto more = feed.next(&batch);
      if (!more.ok()) return more.status().with_context("data of epoch " + std::to_string(epoch));
      // --last-batch pad: the epoch's last step holds the remainder, of which this replica may have
      // fewer rows than the others, or none (then a zero-weight copy of a row keeps it in step).
      const bool short_step = short_last && s == steps_per_epoch - 1;
      if (*more && (short_step ? batch.size > local_batch : batch.size != local_batch)) {
        return internal_error("the data feed gave a batch of " + std::to_string(batch.size) + " examples; " +
                              "each replica trains " + std::to_string(local_batch) + " per step");
      }
      if (!*more && world > 1 && !short_step) {  // the others would wait for this replica in the next all-reduce
        return internal_error("the data feed ran out at step " + std::to_string(s + 1) + " of " +
                              std::to_string(steps_per_epoch) + " of epoch " + std::to_string(epoch));
      }
      if (!*more && !short_step) {
        if (replica.steps) replica.steps->abandon();
        break;
      }
      const int64_t rows = *more ? batch.size : 0;
      if (!*more) {
        if (padding.empty())
          return internal_error("no row kept to pad the short last step of epoch " + std::to_string(epoch));
        batch = padding.batch();
      } else if (short_last && s == steps_per_epoch - 2) {  // a row for a replica that gets none next
        padding.keep(batch);
      }
      if (epoch == first_epoch && s < skip_steps) {  // trained before the checkpoint this run resumed from
        TROUPE_RETURN_IF_ERROR(feed.trained().with_context("data of epoch " + std::to_string(epoch)));
        continue;
      }
      if (replica.steps) replica.steps->phase(StepPhase::forward_backward);  // step timeline
      // The API promises zeroed gradients.
      if (zero) zero->zero_grads(); else std::fill_n(grad_store, grad_floats, 0.0f);
      slots[0] = slots[1] = 0.0f;
      // This replica's share of the step's examples relative to an even one: `weight`, or at a
      // short last step its rows x replicas / the step's rows (0 for a padding row).
      const float step_weight =
          short_step ? static_cast<float>(static_cast<double>(rows) * world / static_cast<double>(last_rows)) : weight;
      if (buckets) buckets->begin_step(grad, epoch, s + 1, step_weight);
      Batch whole = batch;
      whole.features = features;
      whole.loss_scale = scaled ? scaler.scale() : 1.0f;
      auto stats = layered ? layered_step->forward_backward(whole, step_weight)
                           : forward_backward_parts(trainer, whole, param_view, grad_view, o.accumulate, micro_grads);
      if (!stats.ok()) {
        return stats.status().with_context(where + ": forward_backward at epoch " + std::to_string(epoch) +
                                           ", step " + std::to_string(s + 1));
      }
      ++step;
      if (replica.steps) replica.steps->phase(StepPhase::communication);  // step timeline
      if (replica.comm) {
        // (buckets and the layered step weight the gradients themselves, before they are reduced)
        if (!buckets && !layered && step_weight != 1.0f) kernels::cpu::scale(grad, space.size(), step_weight);
        slots[0] = stats->loss * step_weight;
        slots[1] = rows > 0 ? static_cast<float>(stats->correct) : 0.0f;  // a padding row is no example
        Status st = buckets   ? buckets->finish_step(slots)
                    : layered ? replica.comm->allreduce(slots, slots, 2, DType::f32, collectives::ReduceOp::avg, sync)
                              : allreduce_unbucketed(grad_store, grad_floats, replica, sync);
        if (!st.ok()) return st.with_context(where + ": all-reducing gradients at epoch " + std::to_string(epoch) +
                                             ", step " + std::to_string(s + 1));
        stats->loss = slots[0];
        stats->correct = stats->correct < 0 ? -1 : std::llround(slots[1] * world);
      }
      if (step % o.loss_check_every == 0 && !std::isfinite(stats->loss)) {
        return nonfinite_loss(stats->loss, epoch, s + 1, steps_per_epoch, step, oo.lr);
      }
      if (replica.steps) replica.steps->phase(StepPhase::optimizer);  // step timeline
      // f16: the gradients (all-reduced: every replica decides alike) carry the loss scale; an
      // overflow skips the update, else the scale is divided out.
      const float used_scale = scaler.scale();
      const std::string at_step = " at epoch " + std::to_string(epoch) + ", step " + std::to_string(s + 1);
      Expected<bool> finite = true;
      if (scaled) finite = zero ? zero->all_finite() : Expected<bool>(kernels::cpu::all_finite(grad, space.size()));
      if (!finite.ok()) return finite.status().with_context(where + at_step);
      auto apply = scaled ? scaler.update(*finite) : Expected<bool>(true);
      if (!apply.ok()) return apply.status().with_context(where + at_step);
      const float lr = scheduled_lr(schedule, oo.lr, step - 1, total_steps, o.warmup_steps);
      if (*apply && zero) {  // this replica's chunks: unscaled, clipped by the norm over all of them, updated
        if (scaled) zero->scale(1.0f / used_scale);
        if (o.clip_grad_norm > 0) {
          auto norm = zero->clip_grad_norm(o.clip_grad_norm);
          if (!norm.ok()) return norm.status().with_context(where + at_step);
        }
        zero->step(param_data, lr);
        // Every replica holds the whole updated parameters again (stage parameters: each layer is
        // gathered when it is next used).
        if (!layered) TROUPE_RETURN_IF_ERROR(zero->gather(params.data()).with_context(where + at_step));
      } else if (*apply) {
        if (scaled) kernels::cpu::scale(grad, space.size(), 1.0f / used_scale);
        if (o.clip_grad_norm > 0)  // after the all-reduce: the averaged gradient, the same on every replica
          clip_grad_norm(grad, space.size(), o.clip_grad_norm);
        opt->set_lr(lr);
        opt->step(params.data(), grad);
      }
      TROUPE_RETURN_IF_ERROR(feed.trained().with_context("data of epoch " + std::to_string(epoch)));
      if (replica.steps)
        replica.steps->end(rows, stats->loss, buckets ? buckets->stats().comm_seconds : 0,
                           replica.comm ? replica.comm->payload_bytes() : 0);
      if (stats->correct < 0) counted = false;
      tally.add(stats->loss, std::max<int64_t>(stats->correct, 0), short_step ? last_rows : o.batch_size);
      // (stage parameters: no replica holds the whole parameters to compare)
      if (replica.comm && !layered && replica.checksum_every > 0 && step % replica.checksum_every == 0)
        TROUPE_RETURN_IF_ERROR(compare_checksums(params, replica, step).with_context(where));
      if (replica.checkpoints.every > 0 && step % replica.checkpoints.every == 0)
        TROUPE_RETURN_IF_ERROR(write_checkpoint(slice_params, space.size(), slice_state, replica, step, epoch, s + 1)
                                   .with_context(where));
      if (progress) progress(step_progress(o, epoch, steps_per_epoch, tally, seconds_since(epoch_start), total_steps - step));
      if (o.max_steps > 0 && step >= o.max_steps) {
        stop = true;
        break;
      }
    }
    TROUPE_RETURN_IF_ERROR(feed.end_epoch().with_context("data of epoch " + std::to_string(epoch)));
    const double epoch_seconds = seconds_since(epoch_start);
    train_seconds += epoch_seconds;
    EpochStats es = epoch_stats(epoch, tally, o.batch_size, epoch_seconds);
    if (!counted) es.train_accuracy = -1;
    if (o.evaluate_each_epoch || epoch == o.epochs || stop) {
      auto score = layered ? evaluate_layered(*layered_step, test, replica)
                           : evaluate_split(trainer, param_view, test, replica);
      if (!score.ok()) return score.status().with_context(where + ": evaluate after epoch " + std::to_string(epoch));
      es.test_accuracy = score->accuracy;
      es.test_loss = score->loss;
    }
    report_epoch(es, o, steps_per_epoch, &result, progress);
  }
  // --shard parameters: the trained parameters whole only where the caller wants them (final_params:
  // every replica must ask alike, the gather is collective; --save writes layer by layer below);
  // finiteness is agreed from every replica's chunks.
  bool finite = true;
  if (layered && final_params) {
    TROUPE_RETURN_IF_ERROR(zero->gather_all().with_context(where + ": gathering the trained parameters"));
    params.assign(param_data, param_data + space.size());
    zero->release_all();
  }
  if (layered) {
    auto ok = zero->params_finite();
    if (!ok.ok()) return ok.status().with_context(where);
    finite = *ok;
  } else {
    finite = kernels::cpu::all_finite(params.data(), params.size());
  }
  if (!finite) {
    return numeric_error("parameters are not finite after training; lower --lr (" + std::to_string(oo.lr) + ")");
  }
  if (buckets && replica.bucket_stats) *replica.bucket_stats = buckets->stats();
  if (zero && replica.shard_stats) *replica.shard_stats = zero->stats();
  if (layered_step && replica.shard_stats) replica.shard_stats->layer_comm_seconds = layered_step->comm_seconds();
  if (scaled) {
    result.overflow_steps = scaler.skipped();
    result.loss_scale = scaler.scale();
  }
  finish_result(&result, step, o.batch_size, train_seconds);
  if (replica.resume && train_seconds > 0)  // the throughput of the steps this run trained
    result.samples_per_second = static_cast<double>(step - replica.resume->step) * o.batch_size / train_seconds;
  result.wall_seconds = seconds_since(job_start);
  if (!o.save_path.empty()) {
    const int epochs_done = result.history.empty() ? 0 : result.history.back().epoch;
    auto metadata =
        model_metadata(o, train.spec(), train.normalization, setup->model, step, epochs_done, result.test_accuracy);
    if (layered && !final_params) {  // never whole: every replica gathers layer by layer, rank 0 writes each
      TROUPE_RETURN_IF_ERROR(save_layer_by_layer(*zero, bucket_plan, space, o.save_path, o.save_dtype, metadata,
                                                 rank == 0)
                                 .with_context("--save"));
    } else if (rank == 0) {
      TROUPE_RETURN_IF_ERROR(
          save_model(o.save_path, space, params.data(), o.save_dtype, metadata).with_context("--save"));
    }
    if (rank == 0) spdlog::info("model written to {}", o.save_path);
  }
  if (final_params) *final_params = std::move(params);
  return result;
}

}  // namespace troupe
