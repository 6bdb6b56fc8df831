// A group's bookkeeping beside its record (gcs/group_generations.h): the newest generation announced
// (one read for a live worker's watch; it never goes back), generations read from keys, and a job's
// groups forgotten once it ended, other jobs' kept.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "gcs/group_generations.h"
#include "gcs/group_plan.h"
#include "gcs/in_memory_store.h"

using namespace troupe;
using namespace troupe::gcs;

TEST_CASE("group generations: the newest announced wins, whatever order the announcements come in",
          "[gcs][group]") {
  InMemoryStore store;
  CHECK(*announced_generation(store, "job-a") == -1);
  REQUIRE(announce_generation(store, "job-a", 2).ok());
  REQUIRE(announce_generation(store, "job-a", 5).ok());
  REQUIRE(announce_generation(store, "job-a", 3).ok());  // late: an older generation's member
  CHECK(*announced_generation(store, "job-a") == 5);
  CHECK(*announced_generation(store, "job-a-mirror") == -1);  // another group

  // Members of several generations registering at once: the newest stays.
  std::vector<std::thread> writers;
  for (int g = 6; g < 30; ++g) writers.emplace_back([&, g] { REQUIRE(announce_generation(store, "job-b", g).ok()); });
  for (auto& t : writers) t.join();
  CHECK(*announced_generation(store, "job-b") == 29);

  REQUIRE(store.put(kGroupGenerationsTable, "job-c", "seven").ok());
  auto bad = announced_generation(store, "job-c");
  CHECK(bad.status().code() == Code::corrupt_data);
  CHECK(bad.status().message().find("group_generations/job-c") != std::string::npos);
  CHECK(announce_generation(store, "job-c", 1).code() == Code::corrupt_data);
}

TEST_CASE("group generations: the generation in a member's or a plan's key, and no other group's",
          "[gcs][group]") {
  CHECK(generation_in_key("job-a/3/1", "job-a") == 3);
  CHECK(generation_in_key("job-a/12", "job-a") == 12);
  CHECK(generation_in_key("job-a-mirror/3/1", "job-a") == -1);
  CHECK(generation_in_key("job-ab/3", "job-a") == -1);
  CHECK(generation_in_key("job-a/x/1", "job-a") == -1);
  CHECK(generation_in_key("job-a/", "job-a") == -1);
  CHECK(generation_in_key("job-a", "job-a") == -1);
}

TEST_CASE("group generations: a job's groups are forgotten once it ended, its record and other jobs' kept",
          "[gcs][group]") {
  InMemoryStore store;
  for (const std::string g : {"job-a", "job-a-mirror", "job-a-pipe-0", "job-ab"}) {
    REQUIRE(store.put(kGroupMembersTable, g + "/1/0", "m").ok());
    REQUIRE(announce_generation(store, g, 1).ok());
  }
  REQUIRE(put_group_plan(store, "job-a", 2, {0, 1}).ok());
  REQUIRE(store.put("groups", "job-a", "the record").ok());
  forget_groups(store, "job-a");
  CHECK(*store.keys(kGroupMembersTable) == std::vector<std::string>{"job-ab/1/0"});
  CHECK(store.keys(kGroupPlansTable)->empty());
  CHECK(*store.keys(kGroupGenerationsTable) == std::vector<std::string>{"job-ab"});
  CHECK(store.get("groups", "job-a")->has_value());
}
