// The ended actors the GCS keeps (gcs/actor_retention.h): the newest `keep` FINISHED or DEAD
// records stay, older ones go, and no PENDING, ALIVE or RESTARTING record is ever touched.
#include <catch2/catch.hpp>

#include <algorithm>

#include "gcs/actor_retention.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::gcs;

namespace {

ActorRecord actor(ActorState state, int64_t updated_ms) {
  ActorRecord r;
  r.id = ActorId::random();
  r.type_name = "echo";
  r.state = state;
  r.updated_ms = updated_ms;
  return r;
}

}  // namespace

TEST_CASE("actor retention: the newest ended records are kept, older ones removed, live ones never",
          "[gcs][retention]") {
  InMemoryStore store;
  Table<ActorRecord> table(store);
  std::vector<ActorRecord> ended, live;
  for (int i = 0; i < 10; ++i) ended.push_back(actor(i % 2 ? ActorState::dead : ActorState::finished, 1000 + i));
  // Live ones older than every ended one: age alone never removes them.
  live.push_back(actor(ActorState::pending, 1));
  live.push_back(actor(ActorState::alive, 2));
  live.push_back(actor(ActorState::restarting, 3));
  REQUIRE(table.put_many(ended).ok());
  REQUIRE(table.put_many(live).ok());

  auto removed = prune_ended_actors(store, 4);
  REQUIRE(removed.ok());
  CHECK(*removed == 6u);
  auto left = table.list();
  REQUIRE(left.ok());
  CHECK(left->size() == 7u);
  for (const ActorRecord& r : live) CHECK(table.get(r.id.hex()).ok());
  for (int i = 0; i < 10; ++i) CHECK(table.get(ended[i].id.hex()).ok() == (i >= 6));  // the 4 newest

  auto again = prune_ended_actors(store, 4);  // nothing more to do
  REQUIRE(again.ok());
  CHECK(*again == 0u);
  auto all = prune_ended_actors(store, 0);  // 0 keeps every record
  REQUIRE(all.ok());
  CHECK(*all == 0u);
  CHECK(table.list()->size() == 7u);
}

TEST_CASE("actor retention: a table within the bound is left as it is", "[gcs][retention]") {
  InMemoryStore store;
  Table<ActorRecord> table(store);
  for (int i = 0; i < 5; ++i) REQUIRE(table.put(actor(ActorState::dead, i)).ok());
  auto removed = prune_ended_actors(store, 5);
  REQUIRE(removed.ok());
  CHECK(*removed == 0u);
  CHECK(table.list()->size() == 5u);
}
