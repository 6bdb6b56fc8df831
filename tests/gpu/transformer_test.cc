// The transformer's CUDA kernels (kernels/cuda/transformer.h) against their CPU references
// (kernels/cpu/transformer.h, themselves tested against f64 and finite differences in
// tests/kernels): LayerNorm, GELU, causal attention (strided-batched cuBLAS products), the
// vocabulary cross-entropy, the bias gradient and the embeddings (bit for bit: the same sums in the
// same order). Written while no GPU was lent (2026-11-28); first run on the next GPU machine.
#include <algorithm>
#include <cmath>

#include "gpu_test_util.h"
#include "kernels/cpu/transformer.h"
#include "kernels/cuda/transformer.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;
namespace cpu = kernels::cpu;

// Every |got - ref| within atol + rtol * |ref|; the first that is not, named.
void check_close(const std::vector<float>& got, const std::vector<float>& ref, double atol, double rtol,
                 const char* what) {
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = atol + rtol * std::fabs(ref[i]);
    if (!(std::fabs(double(got[i]) - ref[i]) <= tol))
      FAIL(what << "[" << i << "]: " << got[i] << " (gpu) vs " << ref[i] << " (cpu), tolerance " << tol);
  }
}

double largest(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

TEST_CASE("cuda layernorm forward and backward match the cpu's", "[gpu][transformer]") {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {37, 96}, {5, 1000}, {300, 384}};
  for (auto [rows, dim] : shapes) {
    CAPTURE(rows, dim);
    auto x = test::random_floats(size_t(rows * dim), 11 + rows, -2.0f, 3.0f);  // mean away from 0
    auto gamma = test::random_floats(size_t(dim), 12, 0.5f, 1.5f), beta = test::random_floats(size_t(dim), 13);
    std::vector<float> y(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
    cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), rows, dim, 1e-5f, y.data(), mean.data(), rstd.data());
    DeviceArray<float> dx_(x), dg(gamma), db(beta), dy_(x.size()), dm(mean.size()), dr(rstd.size());
    REQUIRE(kc::layernorm_forward(dx_.get(), dg.get(), db.get(), rows, dim, 1e-5f, dy_.get(), dm.get(), dr.get()).ok());
    check_close(dy_.host(), y, 2e-5, 2e-5, "y");
    check_close(dm.host(), mean, 1e-6, 1e-6, "mean");
    check_close(dr.host(), rstd, 0, 2e-6, "rstd");

    auto dy = test::random_floats(x.size(), 14);
    auto dx = test::random_floats(x.size(), 15), dgamma = test::random_floats(size_t(dim), 16),
         dbeta = test::random_floats(size_t(dim), 17);  // the backward adds into them
    DeviceArray<float> gdy(dy), gdx(dx), gdgamma(dgamma), gdbeta(dbeta), gmean(mean), grstd(rstd);
    cpu::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows, dim, dx.data(),
                            dgamma.data(), dbeta.data());
    REQUIRE(kc::layernorm_backward(gdy.get(), dx_.get(), dg.get(), gmean.get(), grstd.get(), rows, dim, gdx.get(),
                                   gdgamma.get(), gdbeta.get())
                .ok());
    check_close(gdx.host(), dx, 1e-5 * largest(dx), 1e-5, "dx");
    check_close(gdgamma.host(), dgamma, 1e-5 * largest(dgamma), 1e-5, "dgamma");
    check_close(gdbeta.host(), dbeta, 1e-5 * largest(dbeta), 1e-5, "dbeta");
  }
}

TEST_CASE("cuda gelu forward and backward match the cpu's", "[gpu][transformer]") {
  for (size_t n : test::test_sizes()) {
    if (n > 100000) continue;
    CAPTURE(n);
    auto x = test::random_floats(n, 21 + n, -6.0f, 6.0f), dy = test::random_floats(n, 22 + n);
    std::vector<float> y(n), dx(n);
    cpu::gelu_forward(x.data(), y.data(), n);
    cpu::gelu_backward(x.data(), dy.data(), dx.data(), n);
    DeviceArray<float> gx(x), gy(n), gdy(dy), gdx(n);
    REQUIRE(kc::gelu_forward(gx.get(), gy.get(), n).ok());
    REQUIRE(kc::gelu_backward(gx.get(), gdy.get(), gdx.get(), n).ok());
    check_close(gy.host(), y, 2e-6, 2e-6, "gelu");
    check_close(gdx.host(), dx, 4e-6, 4e-6, "gelu backward");
  }
}

TEST_CASE("cuda causal attention forward and backward match the cpu's", "[gpu][transformer]") {
  kc::CublasHandle blas;
  REQUIRE(blas.create(nullptr).ok());
  for (cpu::AttentionShape s : {cpu::AttentionShape{3, 1, 2, 8}, cpu::AttentionShape{2, 37, 3, 48},
                                cpu::AttentionShape{1, 128, 4, 64}, cpu::AttentionShape{2, 256, 6, 384}}) {
    CAPTURE(s.batch, s.seq, s.heads, s.dim);
    const size_t rows = size_t(s.batch * s.seq), pn = size_t(s.batch * s.heads * s.seq * s.seq);
    auto qkv = test::random_floats(rows * 3 * s.dim, 31 + rows, -1.0f, 1.0f);
    auto dout = test::random_floats(rows * s.dim, 32 + rows);
    std::vector<float> probs(pn), out(rows * s.dim), dqkv(qkv.size()), scratch(size_t(s.seq * s.seq));
    cpu::attention_forward(qkv.data(), s, probs.data(), out.data());
    cpu::attention_backward(qkv.data(), probs.data(), dout.data(), s, dqkv.data(), scratch.data());
    DeviceArray<float> gqkv(qkv), gprobs(pn), gout(out.size()), gdout(dout), gdqkv(dqkv.size()),
        gscratch(size_t(s.heads * s.seq * s.seq));
    REQUIRE(kc::attention_forward(blas, gqkv.get(), s, gprobs.get(), gout.get()).ok());
    check_close(gprobs.host(), probs, 2e-6, 1e-5, "probs");
    const auto p = gprobs.host();
    for (int64_t m = 0; m < s.batch * s.heads; ++m)  // exact zeros above the diagonal
      for (int64_t i = 0; i < s.seq; ++i)
        for (int64_t j = i + 1; j < s.seq; ++j) REQUIRE(p[size_t((m * s.seq + i) * s.seq + j)] == 0.0f);
    check_close(gout.host(), out, 1e-5, 1e-5, "out");
    REQUIRE(kc::attention_backward(blas, gqkv.get(), gprobs.get(), gdout.get(), s, gdqkv.get(), gscratch.get()).ok());
    check_close(gdqkv.host(), dqkv, 2e-5 * largest(dqkv), 1e-4, "dqkv");
  }
  cpu::AttentionShape bad{1, 4, 3, 8};  // 3 heads do not divide 8
  DeviceArray<float> any(size_t(1024));
  CHECK(kc::attention_forward(blas, any.get(), bad, any.get(), any.get()).code() == Code::invalid_argument);
}

TEST_CASE("cuda vocab_xent matches the cpu's for small and large vocabularies, in place too", "[gpu][transformer]") {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 2}, {7, 50}, {33, 5000}, {512, 32000}};
  for (auto [rows, vocab] : shapes) {
    for (bool in_place : {false, true}) {
      CAPTURE(rows, vocab, in_place);
      auto logits = test::random_floats(size_t(rows * vocab), 41 + rows, -8.0f, 8.0f);
      std::vector<int32_t> targets(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) targets[size_t(r)] = int32_t((r * 7919) % vocab);
      std::vector<float> d(logits.size());
      const float loss = cpu::vocab_xent(logits.data(), targets.data(), rows, vocab, 2.0f, d.data());
      DeviceArray<float> gl(logits), gd(logits.size()), row_loss(static_cast<size_t>(rows)), total(size_t(1));
      DeviceArray<int32_t> gt(targets);
      float* dl = in_place ? gl.get() : gd.get();
      REQUIRE(kc::vocab_xent(gl.get(), gt.get(), rows, vocab, 2.0f, dl, row_loss.get()).ok());
      REQUIRE(kc::sum_in_order(row_loss.get(), rows, 1.0f / static_cast<float>(rows), false, total.get()).ok());
      CHECK(total.host()[0] == Approx(loss).epsilon(1e-5));
      REQUIRE(kc::sum_in_order(row_loss.get(), rows, 1.0f / static_cast<float>(rows), true, total.get()).ok());
      CHECK(total.host()[0] == Approx(2 * loss).epsilon(1e-5));  // accumulated
      check_close(in_place ? gl.host() : gd.host(), d, 4e-6 / rows, 1e-4, "dlogits");
    }
  }
  // A target outside the vocabulary: that row's loss is NaN.
  DeviceArray<float> l(std::vector<float>{1, 2, 3}), rl(size_t(1));
  DeviceArray<int32_t> t(std::vector<int32_t>{3});
  REQUIRE(kc::vocab_xent(l.get(), t.get(), 1, 3, 1.0f, nullptr, rl.get()).ok());
  CHECK(std::isnan(rl.host()[0]));
}

TEST_CASE("cuda bias_grad_add and the embeddings match the cpu's; the embeddings' backward bit for bit",
          "[gpu][transformer]") {
  const int64_t batch = 3, seq = 17, dim = 40, vocab = 11, rows = batch * seq;
  auto dy = test::random_floats(size_t(rows * dim), 51), db = test::random_floats(size_t(dim), 52);
  auto want_db = db;
  cpu::bias_grad_add(dy.data(), rows, dim, want_db.data());
  DeviceArray<float> gdy(dy), gdb(db);
  REQUIRE(kc::bias_grad_add(gdy.get(), rows, dim, gdb.get()).ok());
  check_close(gdb.host(), want_db, 1e-5 * largest(want_db), 1e-6, "db");

  std::vector<float> id_floats(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) id_floats[size_t(i)] = float((i * 5 + i / 3) % vocab);  // repeated ids
  auto tok = test::random_floats(size_t(vocab * dim), 53), pos = test::random_floats(size_t(seq * dim), 54);
  // The CPU model's embed and embed_backward (models/gpt/gpt_model.cc), written out.
  std::vector<float> x(static_cast<size_t>(rows * dim)), dtok = test::random_floats(tok.size(), 55),
                                            dpos = test::random_floats(pos.size(), 56);
  DeviceArray<float> gdtok(dtok), gdpos(dpos);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < dim; ++c) {
      const auto id = int64_t(id_floats[size_t(i)]);
      x[size_t(i * dim + c)] = tok[size_t(id * dim + c)] + pos[size_t((i % seq) * dim + c)];
      dtok[size_t(id * dim + c)] += dy[size_t(i * dim + c)];
      dpos[size_t((i % seq) * dim + c)] += dy[size_t(i * dim + c)];
    }
  DeviceArray<float> gf(id_floats), gtok(tok), gpos(pos), gx(x.size());
  DeviceArray<int32_t> gids(static_cast<size_t>(rows));
  REQUIRE(kc::ids_from_floats(gf.get(), rows, gids.get()).ok());
  REQUIRE(kc::embed_forward(gids.get(), gtok.get(), gpos.get(), rows, seq, dim, gx.get()).ok());
  CHECK_SAME(gx.host(), x);
  REQUIRE(kc::embed_backward(gids.get(), gdy.get(), rows, seq, dim, gdtok.get(), gdpos.get()).ok());
  CHECK_SAME(gdtok.host(), dtok);
  CHECK_SAME(gdpos.host(), dpos);
}

}  // namespace
}  // namespace troupe
