// The process's dataset cache: a split is decoded once and shared, files that changed are read
// again, and failures are reported each time rather than remembered.
#include "data/dataset_cache.h"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "tests/data/idx_writer.h"

namespace troupe {
namespace {

using testing::TempDir;
using testing::write_small_dataset;

TEST_CASE("dataset cache: a split is decoded once, shared by concurrent callers, and equals a direct load",
          "[trainers][data][cache]") {
  TempDir dir;
  write_small_dataset(dir.path(), "train", 40);
  std::vector<std::shared_ptr<const Dataset>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto d = cached_fashion_mnist(dir.path(), Split::train);
      if (d.ok()) got[i] = *d;
    });
  for (auto& t : threads) t.join();
  for (const auto& d : got) {
    REQUIRE(d);
    CHECK(d.get() == got[0].get());  // one decoded copy
  }
  auto direct = load_fashion_mnist(dir.path(), Split::train);
  REQUIRE(direct.ok());
  CHECK(got[0]->count == 40);
  CHECK(got[0]->images == direct->images);
  CHECK(got[0]->labels == direct->labels);
}

TEST_CASE("dataset cache: a file that changed is read again, and a failure is not remembered",
          "[trainers][data][cache]") {
  TempDir dir;
  write_small_dataset(dir.path(), "t10k", 20);
  auto first = cached_fashion_mnist(dir.path(), Split::test);
  REQUIRE(first.ok());
  CHECK((*first)->count == 20);

  // The files replaced by a larger set (another size): the next call sees the new one.
  write_small_dataset(dir.path(), "t10k", 30);
  auto second = cached_fashion_mnist(dir.path(), Split::test);
  REQUIRE(second.ok());
  CHECK((*second)->count == 30);
  CHECK(second->get() != first->get());

  // A missing directory fails each time, naming the file, and leaves nothing in the cache.
  const size_t entries = dataset_cache_size();
  for (int i = 0; i < 2; ++i) {
    auto missing = cached_fashion_mnist(dir.path() + "/absent", Split::train);
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.status().code() == Code::not_found);
    CHECK(missing.status().message().find("absent") != std::string::npos);
  }
  CHECK(dataset_cache_size() == entries);
}

}  // namespace
}  // namespace troupe
