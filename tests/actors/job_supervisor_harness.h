// The head's job supervisor over a fake placement (actors spawned in a local actor system, one
// node) and fake node managers (stops recorded), with the GCS in memory. Shared by the
// supervisor's tests (job_supervisor_test.cc, job_restarts_test.cc).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "actors/actor_system.h"
#include "actors/job_supervisor.h"
#include "caf/all.hpp"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"

namespace troupe::actors::testing {

struct Harness {
  gcs::InMemoryStore store;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  bool fits = true;
  size_t room = 1000;  // the most actors one placement (or dry run) may ask for
  std::string reason = "gang 'job' of 3 needs 3 cpus; 2 free across 1 alive node";
  NodeId node = NodeId::random();
  std::map<ActorId, caf::actor> spawned;  // by the fake placement
  std::vector<ActorId> stopped;
  std::vector<PlacementAsk> last_asks;
  std::vector<std::vector<PlacementAsk>> all_asks;  // every placement asked for, in order
  gcs::Resources released;
  JobSupervisor supervisor{host()};

  Harness() { sys = std::make_unique<caf::actor_system>(cfg); }
  ~Harness() {
    for (auto& [id, a] : spawned) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  JobHost host() {
    JobHost h;
    h.store = &store;
    h.place = [this](const std::vector<PlacementAsk>& asks, const std::string&, const std::string&,
                     const JobId& job) -> Expected<PlacementOutcome> {
      PlacementOutcome o;
      last_asks = asks;
      all_asks.push_back(asks);
      const bool placed = fits && asks.size() <= room;
      record(asks, job, placed);
      if (!placed) {
        o.pending_reason = reason;
        return o;
      }
      o.started = true;
      for (const PlacementAsk& a : asks) {
        caf::actor actor = sys->spawn([]() -> caf::behavior { return {[](int) {}}; });
        spawned[a.id] = actor;
        o.handles[a.id] = actor;
        o.nodes[a.id] = node;
      }
      return o;
    };
    h.fits = [this](const std::vector<PlacementAsk>& asks, const std::string&) { return fits && asks.size() <= room; };
    h.monitor = [](const caf::actor&) {};
    h.stop = [this](const NodeId&, const ActorId& id, const std::string&) -> Status {
      stopped.push_back(id);
      return {};
    };
    h.release = [this](const NodeId&, const gcs::Resources& r) {
      released.cpus += r.cpus;
      released.gpus += r.gpus;
    };
    return h;
  }

  // What the head's placement writes: each ask's record, PENDING with the reason or ALIVE.
  void record(const std::vector<PlacementAsk>& asks, const JobId& job, bool placed) {
    std::vector<gcs::ActorRecord> records;
    for (const PlacementAsk& a : asks) {
      gcs::ActorRecord r;
      r.id = a.id;
      r.job = job;
      r.type_name = a.actor.type_name;
      r.name = a.actor.name;
      r.node = placed ? node : NodeId();
      r.state = placed ? gcs::ActorState::alive : gcs::ActorState::pending;
      r.pending_reason = placed ? "" : reason;
      r.updated_ms = gcs::now_ms();
      records.push_back(std::move(r));
    }
    REQUIRE(gcs::Table<gcs::ActorRecord>(store).put_many(records).ok());
  }
  // Job `id`'s actor records in `state`, counted from the store.
  size_t records_in(const JobId& id, gcs::ActorState state) {
    auto all = gcs::Table<gcs::ActorRecord>(store).list();
    REQUIRE(all.ok());
    return static_cast<size_t>(
        std::count_if(all->begin(), all->end(), [&](const gcs::ActorRecord& r) { return r.job == id && r.state == state; }));
  }

  JobId record_job() {
    gcs::JobRecord j;
    j.id = JobId::random();
    j.strategy = "async";
    REQUIRE(gcs::Table<gcs::JobRecord>(store).put(j).ok());
    return j.id;
  }
  gcs::JobRecord job(const JobId& id) {
    auto j = gcs::Table<gcs::JobRecord>(store).get(id.hex());
    REQUIRE(j.ok());
    return *j;
  }
  // Two workers and one parameter server, 1 cpu each.
  SubmitJob request(const JobId& id) {
    SubmitJob s;
    s.job_id = id.hex();
    s.actors = {{"troupe.worker", "w0", 1, 0, {id.hex(), "0"}},
                {"troupe.worker", "w1", 1, 0, {id.hex(), "1"}},
                {"troupe.ps", "ps0", 1, 0, {id.hex(), "0"}}};
    return s;
  }
  caf::actor_addr addr(const SubmitJobReply& r, size_t i) {
    return spawned.at(*ActorId::from_hex(r.actor_ids.at(i))).address();
  }
};

inline bool was_stopped(const Harness& h, const SubmitJobReply& r, size_t i) {
  const ActorId id = *ActorId::from_hex(r.actor_ids.at(i));
  return std::find(h.stopped.begin(), h.stopped.end(), id) != h.stopped.end();
}


}  // namespace troupe::actors::testing
