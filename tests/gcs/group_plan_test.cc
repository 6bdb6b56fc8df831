// A group's generations announced ahead (gcs/group_plan.h): what an elastic live job's workers read
// their rank and the group's size from, and what their waits see before anyone registers.
#include <catch2/catch.hpp>

#include "gcs/group_generations.h"
#include "gcs/group_plan.h"
#include "gcs/in_memory_store.h"

using namespace troupe;
using namespace troupe::gcs;

TEST_CASE("group plan: a generation's slots in rank order, read back, and bad ones refused", "[gcs][plan]") {
  InMemoryStore store;
  auto none = group_plan(store, "job-a", 3);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  REQUIRE(put_group_plan(store, "job-a", 3, {0, 2, 3}).ok());
  auto plan = group_plan(store, "job-a", 3);
  REQUIRE(plan.ok());
  REQUIRE(plan->has_value());
  CHECK(**plan == std::vector<int>{0, 2, 3});
  CHECK(rank_in_plan(**plan, 0) == 0);
  CHECK(rank_in_plan(**plan, 3) == 2);
  CHECK(rank_in_plan(**plan, 1) == -1);
  CHECK(put_group_plan(store, "job-a", 4, {}).code() == Code::invalid_argument);
  Status twice = put_group_plan(store, "job-a", 4, {1, 1});
  CHECK(twice.code() == Code::invalid_argument);
  CHECK(twice.message().find("slot 1 is negative or named twice") != std::string::npos);
  CHECK(put_group_plan(store, "job-a", 4, {-1}).code() == Code::invalid_argument);

  REQUIRE(store.put(kGroupPlansTable, "job-a/5", "0 x 2").ok());
  auto bad = group_plan(store, "job-a", 5);
  CHECK(bad.status().code() == Code::corrupt_data);
  CHECK(bad.status().message().find("group_plans/job-a/5") != std::string::npos);
}

TEST_CASE("group plan: a plan announces its generation, and old plans go",
          "[gcs][plan]") {
  InMemoryStore store;
  CHECK(*announced_generation(store, "job-b") == -1);
  REQUIRE(put_group_plan(store, "job-b", 2, {0, 1}).ok());
  REQUIRE(put_group_plan(store, "job-b", 4, {1}).ok());
  REQUIRE(put_group_plan(store, "job-b2", 9, {1}).ok());  // another group's, same prefix
  CHECK(*announced_generation(store, "job-b") == 4);
  CHECK(*announced_generation(store, "job-b2") == 9);
  remove_generations_before(store, "job-b", 4);
  CHECK_FALSE(group_plan(store, "job-b", 2)->has_value());
  CHECK(group_plan(store, "job-b", 4)->has_value());
  CHECK(group_plan(store, "job-b2", 9)->has_value());
}
