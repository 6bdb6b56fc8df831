#include "trainers/ps/ps_job.h"

#include <algorithm>

#include "trainers/setup/model_file.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::ps {

Expected<std::unique_ptr<ParameterShard>> make_job_shard(const TrainOptions& o, DataSpec data,
                                                         const PsJobShape& shape, int index) {
  if (index < 0 || index >= shape.shards)
    return invalid_argument("shard " + std::to_string(index) + " of a job of " + std::to_string(shape.shards) +
                            " shards");
  if (shape.workers < 1 || o.batch_size % shape.workers != 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " (the global batch) does not divide "
                            "among " + std::to_string(shape.workers) + " workers");
  const int64_t steps_per_epoch = shape.train_examples / o.batch_size;
  if (steps_per_epoch == 0)
    return invalid_argument("--batch-size " + std::to_string(o.batch_size) + " is larger than the " +
                            std::to_string(shape.train_examples) + " training examples");
  auto setup = set_up_trainer(o, data, 0, shape.workers);
  if (!setup.ok()) return setup.status();
  auto ranges = partition_parameters(setup->space.size(), shape.shards);
  if (!ranges.ok()) return ranges.status();
  std::vector<float> all(setup->space.size());
  init_parameters(setup->space, o.seed, all.data());
  // --init-from: every server takes its range of the file (a checkpoint restored later wins).
  if (!o.init_from.empty())
    TROUPE_RETURN_IF_ERROR(load_model_into(o.init_from, setup->space, o.model, o.init_partial, all.data())
                               .with_context("--init-from, parameter server " + std::to_string(index)));
  const ShardRange range = (*ranges)[static_cast<size_t>(index)];
  auto so = shard_options(o, shape.mode, shape.workers, shape.staleness, steps_per_epoch);
  if (!so.ok()) return so.status();
  so->wait_timeout = shape.wait_timeout;
  so->shards = shape.shards;
  so->total_floats = setup->space.size();
  // --weight-decay-params matrices: this shard's part of the model's matrices, from its range's start.
  for (const auto& [begin, end] : matrix_ranges(setup->space)) {
    const size_t b = std::max(begin, range.begin), e = std::min(end, range.end);
    if (b < e) so->optimizer.decay_ranges.emplace_back(b - range.begin, e - range.begin);
  }
  so->optimizer.decay_ranges_set = true;
  // State blocks (BatchNorm statistics): each push's change is added as it comes, outside the rule.
  so->optimizer.state_ranges = ranges_within(state_ranges(setup->space), range.begin, range.end);
  return ParameterShard::create(index, range,
                                std::vector<float>(all.begin() + static_cast<long>(range.begin),
                                                   all.begin() + static_cast<long>(range.end)),
                                *so);
}

}  // namespace troupe::ps
