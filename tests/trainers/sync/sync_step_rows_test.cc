// The rows and weights of a sync replica's steps (trainers/sync/step_rows.h) and the padding row
// (trainers/sync/padding_row.h): the even split, an elastic replica's uneven share, the padded
// short last step, and the refusals users meet.
#include <catch2/catch.hpp>

#include "trainers/sync/padding_row.h"
#include "trainers/sync/step_rows.h"

using namespace troupe;

namespace {

TrainOptions batch_of(int batch, int epochs = 2) {
  TrainOptions o;
  o.batch_size = batch;
  o.epochs = epochs;
  return o;
}

}  // namespace

TEST_CASE("step rows: 4 replicas split a batch of 128 evenly, the remainder dropped", "[sync][step_rows]") {
  auto r = plan_step_rows(batch_of(128), 6440, 0, 4);
  REQUIRE(r.ok());
  CHECK(r->local_batch == 32);
  CHECK(r->weight == 1.0f);
  CHECK(r->steps_per_epoch == 50);  // 6,440 / 128: 40 examples dropped
  CHECK_FALSE(r->short_last);
  CHECK(r->total_steps == 100);
  CHECK(r->weight_at(49, 32) == 1.0f);
  CHECK(r->examples_at(49) == 128);
  TrainOptions capped = batch_of(128);
  capped.max_steps = 70;
  CHECK(plan_step_rows(capped, 6440, 0, 4)->total_steps == 70);
}

TEST_CASE("step rows: --last-batch pad adds a short step weighted by each replica's rows", "[sync][step_rows]") {
  TrainOptions o = batch_of(128);
  o.last_batch = "pad";
  auto r = plan_step_rows(o, 6440, 0, 4);
  REQUIRE(r.ok());
  CHECK(r->steps_per_epoch == 51);
  CHECK(r->last_rows == 40);
  CHECK(r->short_last);
  CHECK(r->short_step(50));
  CHECK_FALSE(r->short_step(49));
  CHECK(r->keeps_padding(49));
  CHECK(r->examples_at(50) == 40);
  CHECK(r->weight_at(50, 32) == Approx(32.0 * 4 / 40));
  CHECK(r->weight_at(50, 8) == Approx(8.0 * 4 / 40));
  CHECK(r->weight_at(50, 0) == 0.0f);  // a padding row adds nothing
  // The short step takes fewer rows, or none; a whole step exactly its share.
  CHECK(*r->accept(true, 8, 50, 1));
  CHECK(*r->accept(false, 0, 50, 1));
  CHECK(r->accept(true, 33, 50, 1).status().code() == Code::internal);
  CHECK(r->accept(true, 31, 10, 1).status().code() == Code::internal);
}

TEST_CASE("step rows: an elastic replica's uneven rows weigh by their share", "[sync][step_rows][elastic]") {
  auto r = plan_step_rows(batch_of(128), 6400, 64, 3);  // 3 replicas of a 4-shard job: 64, 32, 32
  REQUIRE(r.ok());
  CHECK(r->local_batch == 64);
  CHECK(r->weight == Approx(64.0 * 3 / 128));
  CHECK(plan_step_rows(batch_of(128), 6400, 32, 3)->weight == Approx(32.0 * 3 / 128));
}

TEST_CASE("step rows: a feed that runs out early ends a lone replica's epoch, and fails a group's",
          "[sync][step_rows]") {
  auto one = plan_step_rows(batch_of(100), 1000, 0, 1);
  REQUIRE(one.ok());
  auto ended = one->accept(false, 0, 3, 1);
  REQUIRE(ended.ok());
  CHECK_FALSE(*ended);
  auto group = plan_step_rows(batch_of(100), 1000, 0, 2);
  Status st = group->accept(false, 0, 3, 2).status();
  CHECK(st.code() == Code::internal);
  CHECK_THAT(st.message(), Catch::Contains("ran out at step 4 of 10 of epoch 2"));
}

TEST_CASE("step rows: batches that do not divide, elastic rows beyond the batch and tiny datasets are refused",
          "[sync][step_rows]") {
  Status st = plan_step_rows(batch_of(100), 1000, 0, 3).status();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("use a multiple of 3"));
  TrainOptions micro = batch_of(96);
  micro.accumulate = 5;
  CHECK_THAT(plan_step_rows(micro, 1000, 0, 2).status().message(), Catch::Contains("2 replicas x 5 micro-batches"));
  CHECK(plan_step_rows(batch_of(128), 6400, 129, 3).status().code() == Code::invalid_argument);
  micro.batch_size = 128;
  micro.accumulate = 3;
  CHECK(plan_step_rows(micro, 6400, 64, 3).status().code() == Code::invalid_argument);  // 64 rows in 3 parts
  st = plan_step_rows(batch_of(128), 100, 0, 1).status();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("larger than the 100 training examples"));
}

TEST_CASE("padding row: a copy of a batch's first row, its targets and fields bound", "[sync][step_rows]") {
  DataSpec spec;
  spec.features = 3;
  spec.classes = 4;
  PaddingRow padding(spec);
  CHECK(padding.empty());
  std::vector<float> inputs = {1, 2, 3, 4, 5, 6};
  std::vector<int32_t> labels = {2, 3};
  Batch b{inputs.data(), labels.data(), 2, 3};
  padding.keep(b);
  inputs.assign(6, -1.0f);  // the row is a copy
  REQUIRE_FALSE(padding.empty());
  Batch row = padding.batch();
  CHECK(row.size == 1);
  CHECK(row.features == 3);
  CHECK(std::vector<float>(row.inputs, row.inputs + 3) == std::vector<float>{1, 2, 3});
  REQUIRE(row.labels != nullptr);
  CHECK(row.labels[0] == 2);
  CHECK(row.targets == nullptr);
}
