// Causal multi-head self-attention (kernels/cpu/attention.cc) against a direct f64 reference
// (every row's scores, its masked softmax, the weighted values), and its backward against central
// differences of the forward. Sequences longer than the kernel's 64-row blocks, so the block edges
// (the columns a block multiplies past a row's diagonal) are covered.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/transformer.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::central_difference;
using troupe::testing::first_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

namespace {

std::vector<double> reference(const std::vector<float>& qkv, const cpu::AttentionShape& s) {
  const int64_t T = s.seq, D = s.dim, hd = s.head_dim();
  std::vector<double> out(s.batch * T * D);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> score(i + 1);
        double top = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c)
            dot += double(qkv[(b * T + i) * 3 * D + h * hd + c]) * qkv[(b * T + j) * 3 * D + D + h * hd + c];
          score[j] = dot / std::sqrt(double(hd));
          top = std::max(top, score[j]);
        }
        double sum = 0;
        for (double& v : score) sum += v = std::exp(v - top);
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += score[j] / sum * qkv[(b * T + j) * 3 * D + 2 * D + h * hd + c];
          out[(b * T + i) * D + h * hd + c] = acc;
        }
      }
  return out;
}

}  // namespace

TEST_CASE("causal attention forward matches a direct f64 reference", "[kernels][transformer]") {
  const cpu::AttentionShape s{2, 70, 3, 12};
  // Large scores (values to +-4 over 4 dims) so a softmax without its max subtracted would overflow.
  std::vector<float> qkv = random_floats(s.batch * s.seq * 3 * s.dim, 7, -4.0f, 4.0f);
  for (int64_t i = 0; i < s.seq; i += 9) qkv[i * 3 * s.dim] = 60.0f;  // a score of ~240 / sqrt(4)
  std::vector<float> probs(s.batch * s.heads * s.seq * s.seq, -1.0f), out(s.batch * s.seq * s.dim);
  cpu::attention_forward(qkv.data(), s, probs.data(), out.data());
  CHECK(first_difference(out, reference(qkv, s), 1e-4, 1e-5) == "");
  // Rows sum to 1; nothing above the diagonal.
  for (int64_t bh = 0; bh < s.batch * s.heads; ++bh)
    for (int64_t i = 0; i < s.seq; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < s.seq; ++j) {
        const float p = probs[(bh * s.seq + i) * s.seq + j];
        if (j > i) REQUIRE(p == 0.0f);
        sum += p;
      }
      REQUIRE(sum == Approx(1.0).epsilon(1e-5));
    }
}

TEST_CASE("causal attention backward matches finite differences", "[kernels][transformer][gradcheck]") {
  const cpu::AttentionShape s = GENERATE(cpu::AttentionShape{2, 5, 2, 8}, cpu::AttentionShape{1, 67, 1, 2});
  std::vector<float> qkv = random_floats(s.batch * s.seq * 3 * s.dim, 8);
  const std::vector<float> probe = random_floats(s.batch * s.seq * s.dim, 9);
  std::vector<float> probs(s.batch * s.heads * s.seq * s.seq), out(s.batch * s.seq * s.dim);
  auto loss = [&] {
    cpu::attention_forward(qkv.data(), s, probs.data(), out.data());
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += probe[i] * static_cast<double>(out[i]) + 0.5 * double(out[i]) * out[i];
    return l;
  };
  loss();
  std::vector<float> dout(out.size()), dqkv(qkv.size(), 7.0f), scratch(s.seq * s.seq, 5.0f);
  for (size_t i = 0; i < out.size(); ++i) dout[i] = probe[i] + out[i];
  cpu::attention_backward(qkv.data(), probs.data(), dout.data(), s, dqkv.data(), scratch.data());
  // Every element for the small shape; a spread of them (every part of q, k and v) for the long one.
  const size_t stride = s.seq > 64 ? 7 : 1;
  for (size_t i = 0; i < qkv.size(); i += stride) {
    const double numeric = central_difference(&qkv[i], 1e-2f, loss);
    INFO("dqkv[" << i << "]: analytic " << dqkv[i] << ", numeric " << numeric);
    REQUIRE(gradients_agree(numeric, dqkv[i], 1e-2, 1e-3));
  }
}
