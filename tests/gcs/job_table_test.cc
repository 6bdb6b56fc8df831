// Job records changed by several writers at once (the submitter, the head's job supervisor, a
// job's rank 0): update_job's compare-and-set loop loses no change, and a finished job is not moved
// again.
#include <catch2/catch.hpp>

#include <thread>

#include "gcs/in_memory_store.h"
#include "gcs/job_table.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::gcs;

TEST_CASE("job table: concurrent edits of one job record all land", "[gcs][jobs]") {
  InMemoryStore store;
  JobRecord j;
  j.id = JobId::random();
  REQUIRE(Table<JobRecord>(store).put(j).ok());
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&] {
      for (int i = 0; i < 250; ++i) {
        auto r = update_job(store, j.id, [](JobRecord& rec) -> Status {
          ++rec.step;
          return {};
        });
        REQUIRE(r.ok());
      }
    });
  for (auto& t : writers) t.join();
  auto after = Table<JobRecord>(store).get(j.id.hex());
  REQUIRE(after.ok());
  CHECK(after->step == 1000);
  CHECK(after->updated_ms > 0);
}

TEST_CASE("job table: a finished job is not moved again, and an unknown job is not_found", "[gcs][jobs]") {
  InMemoryStore store;
  JobRecord j;
  j.id = JobId::random();
  REQUIRE(Table<JobRecord>(store).put(j).ok());
  auto done = update_job(store, j.id, finish_job(JobState::succeeded, "done"));
  REQUIRE(done.ok());
  CHECK(done->state == JobState::succeeded);
  CHECK(done->progress == 1);
  CHECK(done->finished_ms > 0);
  auto again = update_job(store, j.id, finish_job(JobState::cancelled, "too late"));
  CHECK(again.status().code() == Code::invalid_argument);
  CHECK(again.status().message().find("already ended (SUCCEEDED)") != std::string::npos);
  CHECK(Table<JobRecord>(store).get(j.id.hex())->message == "done");
  CHECK(update_job(store, JobId::random(), finish_job(JobState::failed, "x")).status().code() == Code::not_found);
}
