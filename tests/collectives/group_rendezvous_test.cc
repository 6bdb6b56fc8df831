// Forming collective groups through the GCS (InMemoryStore): registration, the GroupRecord, a rank
// that never registers, and re-forming without a member that died mid-allreduce.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "collectives/group_rendezvous.h"
#include "gcs/events.h"
#include "gcs/group_generations.h"
#include "gcs/group_plan.h"
#include "gcs/in_memory_store.h"
#include "gcs/records.h"
#include "gcs/tables.h"

using namespace troupe;
using namespace troupe::collectives;

namespace {

bool contains(const Status& st, const std::string& s) { return st.message().find(s) != std::string::npos; }

GroupOptions options(const std::string& name, int64_t generation, int rank, int world_size,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  GroupOptions o;
  o.name = name;
  o.generation = generation;
  o.rank = rank;
  o.world_size = world_size;
  o.node = NodeId::random();
  o.actor = ActorId::random();
  o.timeout = timeout;
  return o;
}

// Sum over `ranks` of each rank's contribution (rank-dependent values).
float value(int id, size_t i) { return static_cast<float>(id * 10 + static_cast<int>(i % 7)); }

Status allreduce_check(Communicator& comm, const std::vector<int>& ids, int my_id, size_t count,
                       std::chrono::milliseconds timeout) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(my_id, i);
  CollectiveOptions co;
  co.timeout = timeout;
  TROUPE_RETURN_IF_ERROR(comm.allreduce(v.data(), v.data(), count, DType::f32, ReduceOp::sum, co));
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int id : ids) want += value(id, i);
    if (v[i] != want)
      return internal_error("element " + std::to_string(i) + ": " + std::to_string(v[i]) + " != " +
                            std::to_string(want));
  }
  return {};
}

}  // namespace

TEST_CASE("group_rendezvous: 4 ranks form a group, record it and allreduce") {
  gcs::InMemoryStore store;
  const int n = 4;
  std::vector<GroupOptions> opts;
  for (int r = 0; r < n; ++r) opts.push_back(options("g", 0, r, n));
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto comm = form_group(store, opts[r]);
      if (!comm) {
        status[r] = comm.status();
        return;
      }
      if ((*comm)->rank() != r || (*comm)->size() != n) {
        status[r] = internal_error("wrong rank/size");
        return;
      }
      status[r] = allreduce_check(**comm, {0, 1, 2, 3}, r, 1000, std::chrono::seconds(10));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << status[r].to_string());
    CHECK(status[r].ok());
  }
  auto record = gcs::Table<gcs::GroupRecord>(store).get("g");
  REQUIRE(record.ok());
  CHECK(record->generation == 0);
  CHECK(record->world_size == n);
  REQUIRE(record->members.size() == static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    CHECK(record->members[r].rank == r);
    CHECK(record->members[r].node == opts[r].node);
    CHECK(record->members[r].actor == opts[r].actor);
    CHECK(record->members[r].address.rfind("127.0.0.1:", 0) == 0);
  }

  SECTION("registering the same generation and rank again is invalid_argument") {
    auto again = form_group(store, options("g", 0, 2, n));
    REQUIRE_FALSE(again.ok());
    CHECK(again.status().code() == Code::invalid_argument);
    CHECK(contains(again.status(), "rank 2 is already registered"));
  }
}

TEST_CASE("group_rendezvous: a rank that never registers makes every other rank time out naming it") {
  gcs::InMemoryStore store;
  const int n = 4, absent = 2;
  const auto timeout = std::chrono::milliseconds(1500);
  std::vector<Status> status(n);
  std::vector<std::chrono::steady_clock::duration> took(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    threads.emplace_back([&, r] {
      auto start = std::chrono::steady_clock::now();
      auto comm = form_group(store, options("g", 3, r, n, timeout));
      took[r] = std::chrono::steady_clock::now() - start;
      status[r] = comm.ok() ? Status{} : comm.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (r == absent) continue;
    INFO("rank " << r << ": " << status[r].to_string());
    CHECK(status[r].code() == Code::timeout);
    CHECK(status[r].message() == "group 'g' generation 3: rank 2 did not register within 1.5 s");
    CHECK(took[r] < timeout + std::chrono::seconds(2));
  }
  CHECK_FALSE(gcs::Table<gcs::GroupRecord>(store).get("g").ok());
}

TEST_CASE("group_rendezvous: a member waiting for its generation gives way to a newer one its peers went to") {
  gcs::InMemoryStore store;
  CHECK(*newest_generation(store, "g") == -1);
  int64_t newer = -1;
  GroupOptions o = options("g", 4, 0, 2, std::chrono::seconds(20));
  o.superseded_by = &newer;
  const auto start = std::chrono::steady_clock::now();
  std::thread late([&] {  // rank 1 of generation 6 registers while rank 0 waits at 4
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(store.put(kGroupMembersTable, group_member_key("g", 6, 1), "127.0.0.1:1 x y").ok());
    REQUIRE(gcs::announce_generation(store, "g", 6).ok());  // as form_group registers
  });
  auto comm = form_group(store, o);
  late.join();
  REQUIRE_FALSE(comm.ok());
  INFO(comm.status().to_string());
  CHECK(comm.status().code() == Code::unavailable);
  CHECK(contains(comm.status(), "group 'g' generation 4 was superseded by generation 6"));
  CHECK(newer == 6);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));  // not its 20 s deadline
  CHECK(*newest_generation(store, "g") == 6);
  // It took its own registration back: generation 4 holds no member.
  CHECK_FALSE(store.get(kGroupMembersTable, group_member_key("g", 4, 0))->has_value());
  // Without superseded_by a member waits for its own generation (until its deadline).
  auto alone = form_group(store, options("g", 7, 0, 2, std::chrono::milliseconds(400)));
  CHECK(alone.status().code() == Code::timeout);
}

TEST_CASE("group_rendezvous: bad options are invalid_argument") {
  gcs::InMemoryStore store;
  CHECK(form_group(store, options("", 0, 0, 1)).status().code() == Code::invalid_argument);
  CHECK(form_group(store, options("a/b", 0, 0, 1)).status().code() == Code::invalid_argument);
  CHECK(form_group(store, options("g", 0, 2, 2)).status().code() == Code::invalid_argument);
  CHECK(form_group(store, options("g", -1, 0, 2)).status().code() == Code::invalid_argument);
  CHECK(form_group(store, options("g", 0, 0, 0)).status().code() == Code::invalid_argument);
}

TEST_CASE("group_rendezvous: a member killed mid-allreduce: the survivors record it, re-form and go on") {
  gcs::InMemoryStore store;
  const int n = 4, dead = 1;
  const auto timeout = std::chrono::seconds(3);
  // Member identities survive re-formation; ranks are renumbered by the caller.
  std::vector<NodeId> nodes(n);
  std::vector<ActorId> actors(n);
  for (int i = 0; i < n; ++i) {
    nodes[i] = NodeId::random();
    actors[i] = ActorId::random();
  }
  const std::vector<int> survivors = {0, 2, 3};  // original ranks; new rank = index here
  std::vector<Status> failure(n), reformed(n);
  std::vector<std::chrono::steady_clock::duration> took(n);
  std::vector<std::thread> threads;
  for (int id = 0; id < n; ++id)
    threads.emplace_back([&, id] {
      GroupOptions o = options("g", 0, id, n);
      o.node = nodes[id];
      o.actor = actors[id];
      auto comm = form_group(store, o);
      if (!comm) {
        failure[id] = comm.status();
        return;
      }
      Status st = allreduce_check(**comm, {0, 1, 2, 3}, id, 4096, timeout);
      if (!st.ok()) {
        failure[id] = st.with_context("first allreduce");
        return;
      }
      if (id == dead) {
        comm->reset();  // the process "dies": its sockets close and it never calls again
        return;
      }
      auto start = std::chrono::steady_clock::now();
      st = allreduce_check(**comm, {0, 1, 2, 3}, id, 4096, timeout);
      took[id] = std::chrono::steady_clock::now() - start;
      comm->reset();  // leave the broken group
      failure[id] = st;
      if (st.ok()) return;
      Status rec = record_group_failure(store, "g", 0, st);
      if (!rec.ok()) {
        reformed[id] = rec;
        return;
      }
      const int new_rank = static_cast<int>(std::find(survivors.begin(), survivors.end(), id) - survivors.begin());
      GroupOptions o1 = options("g", 1, new_rank, static_cast<int>(survivors.size()));
      o1.node = nodes[id];
      o1.actor = actors[id];
      auto comm1 = form_group(store, o1);
      if (!comm1) {
        reformed[id] = comm1.status();
        return;
      }
      reformed[id] = allreduce_check(**comm1, survivors, id, 4096, timeout);
    });
  for (auto& t : threads) t.join();

  for (int id : survivors) {
    INFO("rank " << id << ": failure: " << failure[id].to_string() << "; reformed: " << reformed[id].to_string());
    REQUIRE_FALSE(failure[id].ok());
    CHECK((failure[id].code() == Code::unavailable || failure[id].code() == Code::timeout));
    CHECK(contains(failure[id], "allreduce #2"));
    CHECK(took[id] < timeout + std::chrono::seconds(2));
    CHECK(reformed[id].ok());
  }
  // The dead rank's ring neighbours talk to it directly and name it.
  CHECK((contains(failure[0], "rank 1") || contains(failure[2], "rank 1")));

  auto events = gcs::recent_events(store, 100);
  REQUIRE(events.ok());
  int failed = 0;
  bool names_dead = false;
  for (const auto& e : *events)
    if (e.kind == "group_failed" && e.subject == "g") {
      ++failed;
      CHECK(e.message.find("group 'g' generation 0 failed") != std::string::npos);
      CHECK(e.message.find("allreduce #2") != std::string::npos);
      names_dead = names_dead || e.message.find("rank 1") != std::string::npos;
    }
  CHECK(failed == 3);
  CHECK(names_dead);

  auto record = gcs::Table<gcs::GroupRecord>(store).get("g");
  REQUIRE(record.ok());
  CHECK(record->generation == 1);
  CHECK(record->world_size == 3);
  REQUIRE(record->members.size() == 3);
  for (int r = 0; r < 3; ++r) {
    CHECK(record->members[r].rank == r);
    CHECK(record->members[r].node == nodes[survivors[r]]);
    CHECK(record->members[r].actor == actors[survivors[r]]);
  }
  // Rank 0 of generation 1 removed generation 0's member keys.
  auto rows = store.get_all(kGroupMembersTable);
  REQUIRE(rows.ok());
  for (const auto& row : *rows) CHECK(row.first.rfind("g/1/", 0) == 0);
}

TEST_CASE("group_rendezvous: a generation announced by the group's manager is the newest before anyone registers") {
  gcs::InMemoryStore store;
  REQUIRE(store.put(kGroupMembersTable, group_member_key("e", 2, 0), "127.0.0.1:1 x y").ok());
  REQUIRE(gcs::announce_generation(store, "e", 2).ok());  // as form_group registers
  CHECK(*newest_generation(store, "e") == 2);
  // An elastic job shrinking: its survivors re-form at 4, renumbered; nobody new will register.
  REQUIRE(gcs::put_group_plan(store, "e", 4, {0, 2}).ok());
  CHECK(*newest_generation(store, "e") == 4);
  int64_t newer = -1;
  GroupOptions o = options("e", 3, 1, 2, std::chrono::seconds(20));
  o.superseded_by = &newer;
  auto comm = form_group(store, o);  // rank 1 of 3 waits for a rank 0 that is gone: it goes to 4
  CHECK(comm.status().code() == Code::unavailable);
  CHECK(newer == 4);
}
