// The gpt on a GPU (models/gpt/gpt_cuda.h) against the CPU model it mirrors (gpt_model.h): one
// step's loss and every block's gradient, untied and tied, and the evaluation's loss. Written while
// no GPU was lent (2026-11-28); first run on the next GPU machine.
#include <algorithm>
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/cuda/blas.h"
#include "models/gpt/gpt_cuda.h"
#include "models/gpt/gpt_model.h"
#include "tests/models/small_gpt.h"
#include "trainers/sync/trainer_driver.h"

namespace troupe {
namespace {

using test::DeviceArray;

TEST_CASE("cuda gpt: a step's loss and every block's gradient match the cpu model's, tied or not", "[gpu][gpt]") {
  kernels::cuda::CublasHandle blas;
  REQUIRE(blas.create(nullptr).ok());
  for (bool tie : {false, true}) {
    CAPTURE(tie);
    models::GptConfig c = troupe::testing::small_gpt(tie);  // 2 blocks of 2 heads, wider here:
    c.dim = 32;    // a LayerNorm row wider than a warp
    c.context = 16;
    c.vocab = 50;
    models::GptModel cpu_model(c);
    ParameterSpace space;
    cpu_model.declare(space);
    REQUIRE(space.status().ok());
    std::vector<float> params(space.size());
    init_parameters(space, 7, params.data());
    const int64_t batch = 3, seq = 16, n = batch * seq;
    std::vector<int32_t> tokens(static_cast<size_t>(n)), targets(static_cast<size_t>(n));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      tokens[size_t(i)] = int32_t((i * 13 + 5) % c.vocab);
      targets[size_t(i)] = int32_t((i * 7 + 3) % c.vocab);
      x[size_t(i)] = float(tokens[size_t(i)]);
    }
    const Parameters pv(params.data(), params.size());
    auto loss = cpu_model.forward(tokens, targets.data(), batch, seq, pv);
    REQUIRE(loss.ok());
    std::vector<float> grads(space.size(), 0.0f);
    Gradients gv(grads.data(), grads.size());
    cpu_model.backward(pv, gv, 1.0f);

    models::GptCuda gpu(c, cpu_model.params(), seq, blas);
    REQUIRE(gpu.reserve(static_cast<int>(batch)).ok());
    DeviceArray<float> gp(params), gx(x), gg(std::vector<float>(space.size(), 9.0f)),
        gl(std::vector<float>{0.25f});  // grads overwritten, the loss accumulated
    DeviceArray<int32_t> gt(targets);
    REQUIRE(gpu.forward_backward(gp.get(), gx.get(), gt.get(), static_cast<int>(batch), gg.get(), gl.get(), nullptr).ok());
    CHECK(gl.host()[0] - 0.25f == Approx(*loss).epsilon(1e-5));
    const std::vector<float> got = gg.host();
    for (const ParamBlock& b : space.blocks()) {
      const auto first = static_cast<std::ptrdiff_t>(b.param.offset);
      const std::vector<float> g(got.begin() + first, got.begin() + first + static_cast<std::ptrdiff_t>(b.param.numel));
      const std::vector<float> want(grads.begin() + first,
                                    grads.begin() + first + static_cast<std::ptrdiff_t>(b.param.numel));
      const double diff = troupe::testing::relative_difference(g, want);
      INFO("block " << b.name << ": relative difference " << diff);
      CHECK(diff <= 1e-4);
    }
    DeviceArray<float> el(std::vector<float>{0.0f});
    REQUIRE(gpu.evaluate(gp.get(), gx.get(), gt.get(), static_cast<int>(batch), el.get(), nullptr).ok());
    CHECK(el.host()[0] == Approx(*loss).epsilon(1e-5));
  }
}

}  // namespace
}  // namespace troupe
