// Test helper shared by the store tests: the contract of Store::compare_and_set under contention.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gcs/store.h"

namespace troupe::gcs::testing {

// `threads` threads each add 1 to a counter `rounds` times by get / compare_and_set / retry, thread
// t through store_of(t) (one store shared, or one connection each). The counter ends exact only if
// no two replacements of the same value both succeeded.
inline void race_compare_and_set(const std::function<Store&(int)>& store_of, int threads, int rounds) {
  REQUIRE(store_of(0).put("t", "n", "0").ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Store& s = store_of(t);
      for (int i = 0; i < rounds; ++i) {
        while (true) {
          auto cur = s.get("t", "n");
          if (!cur.ok() || !cur->has_value()) {
            ++failures;
            return;
          }
          auto swapped = s.compare_and_set("t", "n", **cur, std::to_string(std::stoi(**cur) + 1));
          if (!swapped.ok()) {
            ++failures;
            return;
          }
          if (*swapped) break;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(failures == 0);
  CHECK(**store_of(0).get("t", "n") == std::to_string(threads * rounds));
}

}  // namespace troupe::gcs::testing
