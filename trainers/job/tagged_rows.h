// The training rows a data tag names (data/feed/batch_feed.h): the examples of each span, gathered
// from the epochs' shard plans. A batch recomputed from its tag (a replacement worker completing
// its predecessor's last push, a worker replaying pushes to a restored parameter server) is the
// batch that was trained, row for row.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "core/status.h"
#include "data/feed/batch_feed.h"
#include "data/shards/shard_plan.h"
#include "data/readers/fashion_mnist.h"

namespace troupe::job {

struct TaggedRows : GatheredRows {
  std::vector<std::pair<int, int32_t>> origin;  // every row's (epoch, example index)
  // The rows as a Batch of `train`'s (its fields bound through *fields, which must outlive it).
  Batch batch(const Dataset& train, BatchFields* fields) const {
    Batch b = GatheredRows::batch(train.features());
    fields->bind_copy(train.spec(), &b);
    return b;
  }
};

// The rows of `tag` of `train`, its epochs planned with `plan` (planned once each into *plans).
// internal_error when a span lies outside its epoch's plan (servers of another dataset?).
// With `transform` (the job's augmentation), every row transformed as the training batch was.
Status gather_tagged_rows(const Dataset& train, const data::ShardPlanOptions& plan, const DataTag& tag,
                          std::map<int, data::ShardPlan>* plans, TaggedRows* out,
                          const ExampleTransform& transform = {});

}  // namespace troupe::job
