// A sync replica's model state (trainers/sync/replica_state.h): its start from the seed, an update
// with the f16 scale divided out and the norm clipped, the slices a checkpoint takes, a resumed
// start's position, and non-finite parameters named at the end.
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/trainers/sync/sync_parts.h"
#include "trainers/optim/optimizer.h"
#include "trainers/sync/replica_state.h"

using namespace troupe;
using troupe::testing::MeanInputTrainer;

namespace {

TrainOptions sgd(float lr) {
  TrainOptions o;
  o.optimizer = "sgd";
  o.momentum = 0;
  o.lr = lr;
  o.seed = 7;
  return o;
}

DataSpec four_features() {
  DataSpec d;
  d.features = 4;
  d.classes = 10;
  return d;
}

}  // namespace

TEST_CASE("replica state: starts from the seed's parameters, zeroes gradients and slots, applies sgd",
          "[sync][replica_state]") {
  MeanInputTrainer trainer;
  const ParameterSpace space = troupe::testing::mean_input_space(trainer, 4);
  const TrainOptions o = sgd(0.5f);
  auto state = ReplicaState::create(o, Replica{}, trainer, space, four_features(), "trainer 'mean'");
  REQUIRE(state.ok());
  auto start = (*state)->start(o, Replica{}, 10, 0);
  REQUIRE(start.ok());
  CHECK(start->step == 0);
  CHECK(start->first_epoch == 1);
  CHECK(start->skip_steps == 0);
  std::vector<float> seeded(space.size());
  init_parameters(space, o.seed, seeded.data());
  CHECK((*state)->whole_params() == seeded);
  CHECK((*state)->params() == (*state)->whole_params().data());
  CHECK_FALSE((*state)->sharded());

  float* g = (*state)->grad();
  for (size_t i = 0; i < 4; ++i) g[i] = 9.0f;
  (*state)->slots()[0] = (*state)->slots()[1] = 3.0f;
  (*state)->zero_grads();
  CHECK(std::vector<float>(g, g + 4) == std::vector<float>(4, 0.0f));
  CHECK((*state)->slots()[0] == 0.0f);
  CHECK((*state)->slots() == g + 4);  // the slots follow the gradients, for one all-reduce

  // An f16 step's gradients carry a scale of 4: divided out before the update.
  for (size_t i = 0; i < 4; ++i) g[i] = 4.0f * static_cast<float>(i + 1);
  REQUIRE(*(*state)->grads_finite());
  REQUIRE((*state)->update(0.5f, 0.25f, 0, " at step 1").ok());
  for (size_t i = 0; i < 4; ++i) CHECK((*state)->whole_params()[i] == Approx(seeded[i] - 0.5f * (i + 1)));
}

TEST_CASE("replica state: clipping by the whole gradient's norm, and a non-finite gradient seen",
          "[sync][replica_state]") {
  MeanInputTrainer trainer;
  const ParameterSpace space = troupe::testing::mean_input_space(trainer, 4);
  TrainOptions o = sgd(1.0f);
  auto state = ReplicaState::create(o, Replica{}, trainer, space, four_features(), "trainer 'mean'");
  REQUIRE(state.ok());
  REQUIRE((*state)->start(o, Replica{}, 10, 0).ok());
  const std::vector<float> before = (*state)->whole_params();
  float* g = (*state)->grad();
  g[0] = 3.0f, g[1] = 4.0f, g[2] = 0.0f, g[3] = 0.0f;  // norm 5
  REQUIRE((*state)->update(1.0f, 1.0f, 1.0f, " at step 1").ok());  // clipped to norm 1
  CHECK((*state)->whole_params()[0] == Approx(before[0] - 0.6f));
  CHECK((*state)->whole_params()[1] == Approx(before[1] - 0.8f));
  g[2] = std::nanf("");
  CHECK_FALSE(*(*state)->grads_finite());
}

TEST_CASE("replica state: a checkpoint's slices, a resume's position, and the end's finiteness",
          "[sync][replica_state][checkpoint]") {
  MeanInputTrainer trainer;
  const ParameterSpace space = troupe::testing::mean_input_space(trainer, 4);
  TrainOptions o = sgd(0.1f);
  o.optimizer = "adam";
  auto state = ReplicaState::create(o, Replica{}, trainer, space, four_features(), "trainer 'mean'");
  REQUIRE(state.ok());
  REQUIRE((*state)->start(o, Replica{}, 10, 0).ok());
  float* g = (*state)->grad();
  for (size_t i = 0; i < 4; ++i) g[i] = 1.0f;
  REQUIRE((*state)->update(0.1f, 1.0f, 0, " at step 1").ok());
  auto params = (*state)->slice_params(1, 3);
  REQUIRE(params.ok());
  CHECK(*params == std::vector<float>((*state)->whole_params().begin() + 1, (*state)->whole_params().begin() + 3));
  auto opt = (*state)->slice_state(1, 3);
  REQUIRE(opt.ok());

  // A replica resumed from step 23 of 10-step epochs goes on in epoch 3 after 3 of its steps, with
  // the checkpoint's parameters and optimizer state.
  checkpoint::TrainingState saved;
  saved.step = 23;
  saved.epoch = 3;
  saved.epoch_step = 3;
  saved.params = {1, 2, 3, 4};
  auto whole_state = (*state)->slice_state(0, 4);
  REQUIRE(whole_state.ok());
  saved.optimizer = *whole_state;
  Replica resumed;
  resumed.resume = &saved;
  auto again = ReplicaState::create(o, resumed, trainer, space, four_features(), "trainer 'mean'");
  REQUIRE(again.ok());
  auto start = (*again)->start(o, resumed, 10, 0);
  REQUIRE(start.ok());
  CHECK(start->step == 23);
  CHECK(start->first_epoch == 3);
  CHECK(start->skip_steps == 3);
  CHECK((*again)->whole_params() == saved.params);
  CHECK(*(*again)->finish(false));
  (*again)->whole_params()[2] = INFINITY;
  CHECK_FALSE(*(*again)->finish(false));

  // A checkpoint of another model is refused, naming both sizes.
  saved.params = {1, 2};
  auto other = ReplicaState::create(o, resumed, trainer, space, four_features(), "trainer 'mean'");
  REQUIRE(other.ok());
  Status st = (*other)->start(o, resumed, 10, 0).status();
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("the checkpoint holds 2 parameters; trainer 'mean' has 4"));
}

TEST_CASE("replica state: --shard parameters needs a model that splits into layers", "[sync][replica_state][sharded]") {
  MeanInputTrainer trainer;
  const ParameterSpace space = troupe::testing::mean_input_space(trainer, 4);
  const TrainOptions o = sgd(0.1f);
  troupe::testing::on_replicas(2, [&](int, collectives::Communicator& comm) {
    Replica replica;
    replica.comm = &comm;
    replica.shard = ShardStage::parameters;
    Status st = ReplicaState::create(o, replica, trainer, space, four_features(), "trainer 'mean'").status();
    CHECK(st.code() == Code::invalid_argument);
    CHECK_THAT(st.message(), Catch::Contains("does not split into layers"));
  });
}
