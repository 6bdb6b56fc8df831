// What GPU workers take of a job's options, and the optimizer state they checkpoint: a GPU
// replica's checkpoint must be the CPU optimizers' format (trainers/setup/gpu_options.h), so the CPU
// Optimizer's own saved state is what check_device_optimizer_state accepts, vector for vector.
#include <catch2/catch.hpp>

#include "trainers/setup/gpu_options.h"
#include "trainers/optim/optimizer.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;

TEST_CASE("gpu options: the device optimizers keep the CPU optimizers' state vectors", "[gpu_options]") {
  const size_t n = 37;
  struct Case {
    const char* name;
    float momentum;
    int vectors;
  };
  for (const Case& c : {Case{"sgd", 0.9f, 1}, Case{"sgd", 0.0f, 0}, Case{"adam", 0.9f, 2}, Case{"adamw", 0.9f, 2}}) {
    CAPTURE(c.name, c.momentum);
    TrainOptions o;
    o.optimizer = c.name;
    o.momentum = c.momentum;
    CHECK(device_optimizer_vectors(o) == c.vectors);
    auto opt = make_optimizer(optimizer_options(o), n);
    REQUIRE(opt.ok());
    std::vector<float> params(n, 0.5f), grads(n, 0.25f);
    (*opt)->step(params.data(), grads.data());
    const OptimizerState saved = (*opt)->save_state(0, n);
    CHECK(check_device_optimizer_state(o, saved, n).ok());
    // And what the GPU writes (name, steps, its vectors in that order) restores into the CPU one.
    OptimizerState written;
    written.name = o.optimizer;
    written.steps = 1;
    written.vectors.assign(static_cast<size_t>(device_optimizer_vectors(o)), std::vector<float>(n, 0.125f));
    CHECK((*opt)->load_state(written, 0).ok());
    // Another model's (sgd without momentum keeps nothing to compare: the parameters' count is).
    if (c.vectors > 0) CHECK_FALSE(check_device_optimizer_state(o, saved, n + 1).ok());
  }
  TrainOptions sgd;
  sgd.optimizer = "sgd";
  auto adam = make_optimizer(OptimizerOptions{"adam"}, 4);
  REQUIRE(adam.ok());
  Status st = check_device_optimizer_state(sgd, (*adam)->save_state(0, 4), 4);
  CHECK(st.code() == Code::invalid_argument);
  CHECK(st.message().find("adam's; this job trains with sgd") != std::string::npos);
}
