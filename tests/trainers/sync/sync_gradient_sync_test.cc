// How a sync replica's gradients are synchronised (trainers/sync/gradient_sync.h): plain and in
// buckets, with even and uneven weights, the group ends with the weighted mean gradient, the mean
// loss and the summed correct count; a padding row counts no example; a lone replica reduces nothing.
#include <catch2/catch.hpp>

#include "tests/trainers/sync/sync_parts.h"
#include "trainers/sync/gradient_sync.h"

using namespace troupe;
using troupe::testing::MeanInputTrainer;

namespace {

constexpr int64_t kFeatures = 6;

DataSpec spec() {
  DataSpec d;
  d.features = kFeatures;
  d.classes = 10;
  return d;
}

// Rank r's `rows` rows: every input r + 1 (so its mean gradient is r + 1 in every column).
std::vector<float> rows_of(int r, int64_t rows) { return std::vector<float>(rows * kFeatures, static_cast<float>(r + 1)); }

// What one replica ends a step with.
struct Stepped {
  std::vector<float> grads;
  BatchStats stats;
  double comm_seconds = 0;
};

// One step of replica `replica` (rank r: rows_of(r, rows), a padding row when `rows` is 0) at
// `weight`, forward_backward then reduce.
Stepped one_step(const Replica& replica, int r, int64_t rows, float weight) {
  MeanInputTrainer trainer;
  const ParameterSpace space = troupe::testing::mean_input_space(trainer, kFeatures);
  TrainOptions o;
  o.optimizer = "sgd";
  Stepped out;
  auto state = ReplicaState::create(o, replica, trainer, space, spec(), "trainer 'mean'");
  REQUIRE(state.ok());
  REQUIRE((*state)->start(o, replica, 10, r).ok());
  GradientSync sync(replica, **state, trainer, space);
  (*state)->zero_grads();
  const std::vector<float> inputs = rows_of(r, std::max<int64_t>(rows, 1));
  Batch b{inputs.data(), nullptr, std::max<int64_t>(rows, 1), kFeatures};
  auto s = sync.forward_backward(b, weight, 1, 0, 1);
  REQUIRE(s.ok());
  REQUIRE(sync.reduce(&*s, rows).ok());
  out.stats = *s;
  out.grads.assign((*state)->grad(), (*state)->grad() + kFeatures);
  out.comm_seconds = sync.comm_seconds();
  return out;
}

// Two replicas with `rows` rows each at `weights`, reduced through `bucket_bytes` buckets (0:
// plain): each replica's gradient and stats after the reduction.
void reduce_two(const std::vector<int64_t>& rows, const std::vector<float>& weights, size_t bucket_bytes,
                std::vector<std::vector<float>>* grads, std::vector<BatchStats>* stats) {
  grads->assign(2, {});
  stats->assign(2, {});
  troupe::testing::on_replicas(2, [&](int r, collectives::Communicator& comm) {
    Replica replica;
    replica.comm = &comm;
    replica.bucket_bytes = bucket_bytes;
    replica.timeout = std::chrono::seconds(10);
    const size_t i = static_cast<size_t>(r);
    Stepped done = one_step(replica, r, rows[i], weights[i]);
    (*stats)[i] = done.stats;
    (*grads)[i] = std::move(done.grads);
  });
}

}  // namespace

TEST_CASE("gradient sync: two even replicas hold the mean gradient and loss, plain or in buckets",
          "[sync][gradient_sync]") {
  for (size_t bucket_bytes : {size_t{0}, size_t{8}}) {
    INFO("buckets of " << bucket_bytes << " bytes");
    std::vector<std::vector<float>> grads;
    std::vector<BatchStats> stats;
    reduce_two({4, 4}, {1.0f, 1.0f}, bucket_bytes, &grads, &stats);
    for (int r = 0; r < 2; ++r) {
      CHECK(grads[r] == std::vector<float>(kFeatures, 1.5f));  // (1 + 2) / 2
      CHECK(stats[r].loss == 1.5f);
      CHECK(stats[r].correct == 8);  // 4 + 4 rows, summed
    }
  }
}

TEST_CASE("gradient sync: uneven replicas weighted by their rows give the whole batch's mean",
          "[sync][gradient_sync][elastic]") {
  // 6 rows and 2 rows of a global batch of 8: weights 6 x 2 / 8 and 2 x 2 / 8; the mean input is
  // (6 x 1 + 2 x 2) / 8 = 1.25.
  for (size_t bucket_bytes : {size_t{0}, size_t{8}}) {
    INFO("buckets of " << bucket_bytes << " bytes");
    std::vector<std::vector<float>> grads;
    std::vector<BatchStats> stats;
    reduce_two({6, 2}, {1.5f, 0.5f}, bucket_bytes, &grads, &stats);
    for (int r = 0; r < 2; ++r) {
      for (float g : grads[r]) CHECK(g == Approx(1.25f));
      CHECK(stats[r].loss == Approx(1.25f));
    }
  }
}

TEST_CASE("gradient sync: a padding row adds nothing and counts no example", "[sync][gradient_sync][last-batch]") {
  std::vector<std::vector<float>> grads;
  std::vector<BatchStats> stats;
  // A short last step of 3 rows, all on replica 1 (weight 3 x 2 / 3); replica 0 trains a padding row.
  reduce_two({0, 3}, {0.0f, 2.0f}, 0, &grads, &stats);
  for (int r = 0; r < 2; ++r) {
    CHECK(grads[r] == std::vector<float>(kFeatures, 2.0f));  // replica 1's rows alone
    CHECK(stats[r].correct == 3);
  }
}

TEST_CASE("gradient sync: a lone replica keeps its own gradient and stats", "[sync][gradient_sync]") {
  const Stepped s = one_step(Replica{}, 2, 5, 1.0f);
  CHECK(s.stats.correct == 5);
  CHECK(s.grads == std::vector<float>(kFeatures, 3.0f));
  CHECK(s.comm_seconds == 0);
}
