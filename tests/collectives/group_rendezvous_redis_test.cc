// form_group against a real redis-server (RedisStore): each rank on its own connection, as ranks in
// separate processes would be.
#include <catch2/catch.hpp>

#include <thread>

#include "collectives/group_rendezvous.h"
#include "gcs/tables.h"
#include "tests/gcs/redis_fixture.h"

using namespace troupe;
using namespace troupe::collectives;

TEST_CASE("group_rendezvous (redis): 3 ranks register in redis, form a group and allreduce") {
  auto& server = gcs::testing::shared_redis();
  const std::string prefix = "group_rendezvous_redis";
  auto admin = gcs::testing::connect_store(server, prefix);  // cleans the prefix
  const int n = 3;
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      gcs::RedisStoreOptions so;
      so.redis = server.client_options();
      so.prefix = prefix;
      auto store = gcs::RedisStore::connect(so);
      if (!store) {
        status[r] = store.status();
        return;
      }
      GroupOptions o;
      o.name = "rg";
      o.generation = 5;
      o.rank = r;
      o.world_size = n;
      o.node = NodeId::random();
      o.actor = ActorId::random();
      o.timeout = std::chrono::seconds(10);
      auto comm = form_group(**store, o);
      if (!comm) {
        status[r] = comm.status();
        return;
      }
      std::vector<float> v(100, static_cast<float>(r + 1));
      CollectiveOptions co;
      co.timeout = std::chrono::seconds(10);
      status[r] = (*comm)->allreduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, co);
      if (status[r].ok() && v[99] != 6.0f) status[r] = internal_error("wrong sum " + std::to_string(v[99]));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << status[r].to_string());
    CHECK(status[r].ok());
  }
  auto record = gcs::Table<gcs::GroupRecord>(*admin).get("rg");
  REQUIRE(record.ok());
  CHECK(record->generation == 5);
  CHECK(record->world_size == n);
  CHECK(record->members.size() == static_cast<size_t>(n));
}
