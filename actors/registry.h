// Actor types by name, and the table of actors a node manager has spawned.
//
// Registry: "echo" -> factory. A factory spawns one caf::actor in a given system from string
// arguments. Types are added while a process sets up (before any node manager uses the registry);
// after that the registry is only read, from any thread.
//
//   Registry reg = Registry::with_builtins();              // "counter", "echo"
//   reg.add("trainer", [](caf::actor_system& sys, const std::vector<std::string>& args)
//                          -> Expected<caf::actor> { return sys.spawn(trainer_actor, args); });
//   reg.add_behavior("pinger", [](caf::event_based_actor* self, const std::vector<std::string>&)
//                                  -> caf::behavior { return {[](const Call&) { ... }}; });
//   auto a = reg.spawn(sys, "echo", {});                    // Expected<caf::actor>
//
// Exceptions: an exception escaping a handler kills the actor. Actors spawned through
// add_behavior (and the built-ins) report it as an error carrying the exception's what(), so the
// node manager's crash report names the cause; hand-written factories get the same by calling
// report_exceptions(self) first thing in the actor.
//
// ActorTable: the actors one node manager owns, by ActorId, by unique name and by CAF actor id
// (what a down message carries). Single-threaded: only its owning actor touches it.
//
// Built-in types, for tests and benchmarks; both speak the messages of actors/messages.h:
//   echo     Call{m, p} -> CallReply{p}; CallBatch -> one reply per call; Cast/CastBatch ignored.
//   counter  state: an int64 (args[0] = initial value, default 0).
//            Call/Cast{"add", n}  adds n (empty payload = 1); Call{"get"} -> CallReply{value};
//            CallBatch and CastBatch apply each item in order. Unknown methods answer an
//            invalid_argument error naming the method (Casts with unknown methods are dropped).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "caf/actor.hpp"
#include "caf/behavior.hpp"
#include "caf/fwd.hpp"
#include "core/ids.h"
#include "core/status.h"

namespace troupe::actors {

using ActorFactory =
    std::function<Expected<caf::actor>(caf::actor_system& sys, const std::vector<std::string>& args)>;
using BehaviorFactory =
    std::function<caf::behavior(caf::event_based_actor* self, const std::vector<std::string>& args)>;

// Makes an exception escaping `self`'s handlers end the actor with an error that names it
// ("uncaught exception: <what>") instead of CAF's bare runtime_error. Call from inside the actor.
void report_exceptions(caf::scheduled_actor* self);

class Registry {
 public:
  // A registry holding "echo" and "counter".
  static Registry with_builtins();

  // Adds `factory` under `type_name`. invalid_argument when the name is empty or taken, or the
  // factory is empty.
  Status add(const std::string& type_name, ActorFactory factory);
  // Adds a function-based actor type: `make` returns the behavior of each new actor, which runs
  // with report_exceptions() installed. Errors as add().
  Status add_behavior(const std::string& type_name, BehaviorFactory make);

  bool contains(const std::string& type_name) const;
  std::vector<std::string> type_names() const;  // sorted
  std::string type_list() const;                // "counter, echo" (for error messages)

  // Spawns an actor of `type_name` in `sys`. not_found listing the known types when the name is
  // not registered; the factory's error (with the type named) when it fails.
  Expected<caf::actor> spawn(caf::actor_system& sys, const std::string& type_name,
                             const std::vector<std::string>& args) const;

 private:
  std::map<std::string, ActorFactory> factories_;
};

// Registers the built-in "echo" and "counter" types (see above).
Status add_builtin_types(Registry& registry);

class ActorTable {
 public:
  struct Entry {
    ActorId id;
    std::string name;       // may be empty
    std::string type_name;
    caf::actor handle;
    std::string stop_reason;  // set when a stop was requested, so the exit reads "stopped: ..."
    std::vector<int> gpu_ids;  // the node's devices it holds (GpuAssignments)
  };

  // invalid_argument when the id or (non-empty) name is already taken.
  Status check_free(const ActorId& id, const std::string& name) const;
  // Adds `entry`; the caller has checked that its id and name are free.
  void insert(Entry entry);
  // Removes and returns the entry of the CAF actor `caf_id`; false when none.
  bool erase_by_caf_id(uint64_t caf_id, Entry* out);

  Entry* find(const ActorId& id);
  Entry* find_name(const std::string& name);
  size_t size() const { return by_id_.size(); }
  // Every entry, for shutdown.
  std::vector<Entry> entries() const;

 private:
  std::unordered_map<ActorId, Entry> by_id_;
  std::unordered_map<std::string, ActorId> by_name_;
  std::unordered_map<uint64_t, ActorId> by_caf_id_;
};

}  // namespace troupe::actors
