// Tensor: host allocation, views, slices, reshapes, copies, errors and the no-GPU behaviour.
#include "core/tensor.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>

namespace troupe {
namespace {

Tensor arange(Shape shape) {
  Tensor t = Tensor::host(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("tensor: shape helpers", "[core][tensor]") {
  CHECK(shape_numel({}) == 1);
  CHECK(shape_numel({0}) == 0);
  CHECK(shape_numel({128, 784}) == 100352);
  CHECK(shape_string({128, 784}) == "[128, 784]");
  CHECK(shape_string({}) == "[]");
}

TEST_CASE("tensor: default tensor is empty", "[core][tensor]") {
  Tensor t;
  CHECK(t.shape() == Shape{0});
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.defined());
  CHECK_FALSE(t.owns_storage());
  CHECK(t.device().is_cpu());
}

TEST_CASE("tensor: host allocation", "[core][tensor]") {
  Tensor t = Tensor::host(DType::f32, {2, 3});
  CHECK(t.dtype() == DType::f32);
  CHECK(t.rank() == 2);
  CHECK(t.dim(0) == 2);
  CHECK(t.dim(1) == 3);
  CHECK_THROWS_AS(t.dim(2), std::out_of_range);
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(t.owns_storage());
  CHECK(t.device() == Device::cpu());
  CHECK(reinterpret_cast<uintptr_t>(t.data()) % 64 == 0);

  Tensor h = Tensor::host(DType::bf16, {5});
  CHECK(h.nbytes() == 10);
  Tensor z = Tensor::host_zeros(DType::f16, {1000});
  for (int i = 0; i < 1000; ++i) REQUIRE(z.data_as<uint16_t>()[i] == 0);
  Tensor scalar = Tensor::host(DType::f32, {});
  CHECK(scalar.numel() == 1);
  CHECK(scalar.rank() == 0);
}

TEST_CASE("tensor: negative dimensions are refused", "[core][tensor]") {
  auto t = Tensor::empty(DType::f32, {2, -1});
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Code::invalid_argument);
  CHECK_THAT(t.status().message(), Catch::Contains("[2, -1]"));
  CHECK_THROWS_AS(Tensor::host(DType::f32, {-3}), std::invalid_argument);
}

TEST_CASE("tensor: shapes whose size overflows are refused, not under-allocated", "[core][tensor]") {
  for (const Shape& s : {Shape{int64_t{1} << 62, 4}, Shape{int64_t{1} << 31, int64_t{1} << 31, 8}}) {
    auto t = Tensor::empty(DType::f32, s);
    INFO(shape_string(s));
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == Code::invalid_argument);
    CHECK_THAT(t.status().message(), Catch::Contains(shape_string(s)));
    CHECK_THROWS_AS(Tensor::host(DType::f32, s), std::invalid_argument);
  }
  Tensor empty = Tensor::host(DType::f32, {0});
  CHECK(empty.reshape({int64_t{1} << 62, 4, 0}).status().code() == Code::invalid_argument);
}

TEST_CASE("tensor: views share memory and own nothing", "[core][tensor]") {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  Tensor v = Tensor::view(buf, DType::f32, {3, 2});
  CHECK_FALSE(v.owns_storage());
  CHECK(v.data() == buf);
  v.data_as<float>()[4] = 40;
  CHECK(buf[4] == 40);
  Tensor handle = v;  // copying a handle shares the bytes
  CHECK(handle.data() == buf);
}

TEST_CASE("tensor: slice takes rows and shares storage", "[core][tensor]") {
  Tensor t = arange({4, 3});
  auto s = t.slice(1, 3);
  REQUIRE(s.ok());
  CHECK(s->shape() == Shape{2, 3});
  CHECK(s->data_as<float>()[0] == 3.0f);
  CHECK(s->data_as<float>()[5] == 8.0f);
  CHECK(s->owns_storage());
  s->data_as<float>()[0] = -1;
  CHECK(t.data_as<float>()[3] == -1.0f);

  auto empty = t.slice(2, 2);
  REQUIRE(empty.ok());
  CHECK(empty->numel() == 0);
  auto all = t.slice(0, 4);
  REQUIRE(all.ok());
  CHECK(all->shape() == t.shape());

  for (auto [b, e] : {std::pair<int64_t, int64_t>{-1, 2}, {3, 2}, {0, 5}}) {
    auto bad = t.slice(b, e);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == Code::invalid_argument);
    CHECK_THAT(bad.status().message(), Catch::Contains("[4, 3]"));
  }
  CHECK(Tensor::host(DType::f32, {}).slice(0, 1).status().code() == Code::invalid_argument);
}

TEST_CASE("tensor: a slice keeps its storage alive", "[core][tensor]") {
  Tensor s;
  {
    Tensor t = arange({100, 10});
    s = t.slice(90, 100).value();
  }
  CHECK(s.data_as<float>()[0] == 900.0f);
  CHECK(s.data_as<float>()[99] == 999.0f);
}

TEST_CASE("tensor: reshape", "[core][tensor]") {
  Tensor t = arange({2, 6});
  auto r = t.reshape({3, 4});
  REQUIRE(r.ok());
  CHECK(r->shape() == Shape{3, 4});
  CHECK(r->data() == t.data());
  auto bad = t.reshape({5, 2});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK_THAT(bad.status().message(), Catch::Contains("[2, 6]"));
  CHECK_THAT(bad.status().message(), Catch::Contains("[5, 2]"));
  CHECK(t.reshape({-2, -6}).status().code() == Code::invalid_argument);
}

TEST_CASE("tensor: clone and copy_from copy bytes", "[core][tensor]") {
  Tensor t = arange({3, 3});
  auto c = t.clone();
  REQUIRE(c.ok());
  CHECK(c->data() != t.data());
  CHECK(c->shape() == t.shape());
  c->data_as<float>()[0] = 42;
  CHECK(t.data_as<float>()[0] == 0.0f);

  Tensor dst = Tensor::host_zeros(DType::f32, {9});  // same count, other shape: allowed
  REQUIRE(dst.copy_from(t).ok());
  for (int i = 0; i < 9; ++i) CHECK(dst.data_as<float>()[i] == static_cast<float>(i));

  Status wrong_dtype = Tensor::host(DType::f16, {3, 3}).copy_from(t);
  CHECK(wrong_dtype.code() == Code::invalid_argument);
  CHECK_THAT(wrong_dtype.message(), Catch::Contains("f16"));
  Tensor small = Tensor::host_zeros(DType::f32, {8});
  CHECK(small.copy_from(t).code() == Code::invalid_argument);
  CHECK(small.data_as<float>()[7] == 0.0f);  // nothing copied on error

  Tensor z = arange({4});
  REQUIRE(z.zero().ok());
  for (int i = 0; i < 4; ++i) CHECK(z.data_as<float>()[i] == 0.0f);
}

TEST_CASE("tensor: to_string", "[core][tensor]") {
  CHECK(Tensor::host(DType::f32, {128, 784}).to_string() == "Tensor(f32, [128, 784], cpu, owning)");
  uint16_t buf[4];
  CHECK(Tensor::view(buf, DType::bf16, {2, 2}).to_string() == "Tensor(bf16, [2, 2], cpu, view)");
}

TEST_CASE("tensor: device allocation without a GPU is unavailable", "[core][tensor]") {
  std::string why;
  if (cuda_device_count(&why) > 0) {
    auto t = Tensor::empty(DType::f32, {4}, Device::cuda(0));
    REQUIRE(t.ok());
    CHECK(t->device() == Device::cuda(0));
    return;
  }
  CHECK_FALSE(why.empty());
  auto t = Tensor::empty(DType::f32, {4}, Device::cuda(0));
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().code() == Code::unavailable);
  CHECK_THAT(t.status().message(), Catch::Contains("cuda:0"));
  auto moved = arange({4}).to(Device::cuda(0));
  REQUIRE_FALSE(moved.ok());
  CHECK(moved.status().code() == Code::unavailable);
  float fake[4];
  Tensor dev_view = Tensor::view(fake, DType::f32, {4}, Device::cuda(0));
  CHECK(dev_view.zero().code() == Code::unavailable);
}

}  // namespace troupe
