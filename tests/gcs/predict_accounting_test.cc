// A prediction job's exactly-once accounting (gcs/predict_accounting.h): shards DONE and parts that
// tile the rows prove it; a missing, doubled, unassembled or unfinished piece is named.
#include <catch2/catch.hpp>

#include "gcs/in_memory_store.h"
#include "gcs/predict_accounting.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::gcs;

namespace {

// Shard s of `sizes` DONE (claimed `claims[s]` times) and its part recorded, assembled.
void predicted(Store& store, const JobId& job, const std::vector<int64_t>& sizes, const std::vector<int>& claims) {
  int64_t first = 0;
  for (size_t s = 0; s < sizes.size(); ++s) {
    ShardRecord r;
    r.job = job;
    r.epoch = 1;
    r.shard = static_cast<int>(s);
    r.state = ShardState::done;
    r.owner = predictor_identity(job, static_cast<int>(s % 2));
    r.examples = r.progress = sizes[s];
    r.claims = claims[s];
    REQUIRE(Table<ShardRecord>(store).put(r).ok());
    PredictedPart p;
    p.job = job;
    p.shard = r.shard;
    p.first_row = first;
    p.rows = sizes[s];
    p.width = 10;
    p.owner = r.owner;
    p.attempt = claims[s] - 1;
    p.checksum = "0123456789abcdef";
    p.assembled = true;
    REQUIRE(Table<PredictedPart>(store).put(p).ok());
    first += sizes[s];
  }
}

}  // namespace

TEST_CASE("predict accounting: parts tiling the rows of DONE shards prove every row once", "[gcs][accounting][predict]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  predicted(store, job, {100, 100, 37}, {1, 2, 1});
  auto rep = account_predict_job(store, job, 3, 237);
  REQUIRE(rep.ok());
  INFO(rep->summary());
  CHECK(rep->exactly_once);
  CHECK(rep->reclaimed_shards == 1);
  CHECK(rep->attempts == 2);  // predictor 0 in its attempt 0, predictor 1 in its attempt 1
  CHECK(rep->summary().find("every row of 237 predicted exactly once") != std::string::npos);
  // The record round-trips.
  auto parts = predicted_parts(store, job);
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 3u);
  CHECK(parts->at(2).first_row == 200);
  CHECK(parts->at(2).checksum == "0123456789abcdef");
  // Identities differ by slot and job, and not by attempt.
  CHECK(predictor_identity(job, 0) != predictor_identity(job, 1));
  CHECK(predictor_identity(job, 0) == predictor_identity(job, 0));
  CHECK(predictor_identity(JobId::random(), 0) != predictor_identity(job, 0));
}

TEST_CASE("predict accounting: a missing part, overlapping rows, an unassembled part, an unfinished shard are named",
          "[gcs][accounting][predict]") {
  InMemoryStore store;
  const JobId job = JobId::random();
  predicted(store, job, {100, 100, 100}, {1, 1, 1});
  SECTION("missing") {
    REQUIRE(store.remove("predicted_parts", job.hex() + "/1").ok());
    auto rep = account_predict_job(store, job, 3, 300);
    REQUIRE(rep.ok());
    CHECK_FALSE(rep->exactly_once);
    CHECK(rep->summary().find("shard 1 has no predicted part") != std::string::npos);
    CHECK(rep->summary().find("rows 100-199 never predicted") != std::string::npos);
  }
  SECTION("overlapping and unassembled") {
    auto p = Table<PredictedPart>(store).get(job.hex() + "/2");
    REQUIRE(p.ok());
    p->first_row = 150;
    p->assembled = false;
    REQUIRE(Table<PredictedPart>(store).put(*p).ok());
    auto rep = account_predict_job(store, job, 3, 300);
    REQUIRE(rep.ok());
    CHECK_FALSE(rep->exactly_once);
    CHECK(rep->summary().find("rows 150-199 predicted twice") != std::string::npos);
    CHECK(rep->summary().find("shard 2's part was not assembled") != std::string::npos);
    CHECK(rep->summary().find("rows 250-299 never predicted") != std::string::npos);
  }
  SECTION("unfinished") {
    auto r = Table<ShardRecord>(store).get(job.hex() + "/1/0");
    REQUIRE(r.ok());
    r->state = ShardState::assigned;
    REQUIRE(Table<ShardRecord>(store).put(*r).ok());
    auto rep = account_predict_job(store, job, 3, 300);
    REQUIRE(rep.ok());
    CHECK(rep->summary().find("shard 0 is ASSIGNED, not DONE") != std::string::npos);
  }
}
