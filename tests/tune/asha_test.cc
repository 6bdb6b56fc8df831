// ASHA's rungs and its keep-or-stop rule (tune/asha.h).
#include <catch2/catch.hpp>

#include "tune/asha.h"

using namespace troupe::tune;

TEST_CASE("asha: rungs are grace x eta^i below the trials' epochs", "[tune]") {
  CHECK(asha_rungs(1, 3, 10) == std::vector<int>{1, 3, 9});
  CHECK(asha_rungs(1, 3, 9) == std::vector<int>{1, 3});
  CHECK(asha_rungs(2, 2, 20) == std::vector<int>{2, 4, 8, 16});
  CHECK(asha_rungs(5, 3, 5).empty());
  CHECK(asha_rungs(1, 1, 10).empty());  // eta must be at least 2
}

TEST_CASE("asha: the top ceil(k/eta) of the k trials at a rung go on, the first always", "[tune]") {
  CHECK(asha_keeps({}, 0.1, 3, true));              // first to arrive
  CHECK_FALSE(asha_keeps({0.8}, 0.7, 2, true));     // k=2, keep 1: 0.8
  CHECK(asha_keeps({0.8}, 0.9, 2, true));
  CHECK_FALSE(asha_keeps({0.8, 0.9}, 0.85, 3, true));  // k=3, keep 1
  CHECK(asha_keeps({0.8, 0.9, 0.7}, 0.85, 3, true));   // k=4, keep 2: 0.9, 0.85
  CHECK(asha_cutoff({0.8, 0.9, 0.7}, 0.6, 3, true) == Approx(0.8));
  // min mode: smaller is better.
  CHECK(asha_keeps({0.5}, 0.4, 2, false));
  CHECK_FALSE(asha_keeps({0.5}, 0.6, 2, false));
  CHECK(asha_cutoff({0.5, 0.3, 0.9}, 0.6, 2, false) == Approx(0.5));
}
