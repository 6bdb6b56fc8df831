// What a sync replica checks after a step (trainers/sync/replica_checks.h): replicas whose
// parameters agree pass the checksum comparison; one that differs is named with the step.
#include <catch2/catch.hpp>

#include "tests/trainers/sync/sync_parts.h"
#include "trainers/sync/replica_checks.h"

using namespace troupe;

TEST_CASE("replica checks: equal parameters pass, a replica that diverged is named", "[sync][replica_checks]") {
  std::vector<Status> same(3), differ(3);
  troupe::testing::on_replicas(3, [&](int r, collectives::Communicator& comm) {
    Replica replica;
    replica.comm = &comm;
    replica.timeout = std::chrono::seconds(10);
    std::vector<float> params(100, 0.25f);
    same[static_cast<size_t>(r)] = compare_checksums(params, replica, 40);
    if (r == 2) params[17] = 0.2500001f;
    differ[static_cast<size_t>(r)] = compare_checksums(params, replica, 41);
  });
  for (int r = 0; r < 3; ++r) {
    INFO("replica " << r);
    CHECK(same[static_cast<size_t>(r)].ok());
    const Status& st = differ[static_cast<size_t>(r)];
    CHECK(st.code() == Code::internal);
    CHECK_THAT(st.message(), Catch::Contains("replicas diverged: at step 41 replica 2's parameter checksum"));
  }
}
