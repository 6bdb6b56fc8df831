#include "actors/registry.h"

#include <cerrno>
#include <cstdlib>

#include "actors/actor_system.h"
#include "actors/messages.h"
#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/scheduled_actor.hpp"
#include "caf/stateful_actor.hpp"

namespace troupe::actors {

// -- Registry ---------------------------------------------------------------------------------------

Registry Registry::with_builtins() {
  Registry r;
  Status st = add_builtin_types(r);
  assert(st.ok() && "built-in actor types clash");
  (void)st;
  return r;
}

Status Registry::add(const std::string& type_name, ActorFactory factory) {
  if (type_name.empty()) return invalid_argument("actor registry: type name is empty");
  if (!factory) return invalid_argument("actor registry: factory for '" + type_name + "' is empty");
  if (!factories_.emplace(type_name, std::move(factory)).second) {
    return invalid_argument("actor registry: type '" + type_name +
                            "' is already registered; pick another name");
  }
  return Status::ok_status();
}

Status Registry::add_behavior(const std::string& type_name, BehaviorFactory make) {
  if (!make) return invalid_argument("actor registry: behavior for '" + type_name + "' is empty");
  return add(type_name, [make = std::move(make)](caf::actor_system& sys,
                                                 const std::vector<std::string>& args)
                            -> Expected<caf::actor> {
    return sys.spawn([make, args](caf::event_based_actor* self) {
      report_exceptions(self);
      return make(self, args);
    });
  });
}

void report_exceptions(caf::scheduled_actor* self) {
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& eptr) -> caf::error {
    try {
      std::rethrow_exception(eptr);
    } catch (const std::exception& e) {
      return to_error(internal_error(std::string("uncaught exception: ") + e.what()));
    } catch (...) {
      return to_error(internal_error("uncaught exception of a non-std type"));
    }
  });
}

bool Registry::contains(const std::string& type_name) const {
  return factories_.count(type_name) != 0;
}

std::vector<std::string> Registry::type_names() const {
  std::vector<std::string> names;
  names.reserve(factories_.size());
  for (const auto& kv : factories_) names.push_back(kv.first);
  return names;
}

std::string Registry::type_list() const {
  std::string out;
  for (const auto& kv : factories_) out += (out.empty() ? "" : ", ") + kv.first;
  return out.empty() ? "(none)" : out;
}

Expected<caf::actor> Registry::spawn(caf::actor_system& sys, const std::string& type_name,
                                     const std::vector<std::string>& args) const {
  auto it = factories_.find(type_name);
  if (it == factories_.end()) {
    return not_found("unknown actor type '" + type_name + "'; known types: " + type_list() +
                     " — register it with Registry::add on every node");
  }
  Expected<caf::actor> actor = it->second(sys, args);
  if (!actor) return actor.status().with_context("spawning actor of type '" + type_name + "'");
  if (!*actor) return internal_error("factory of actor type '" + type_name + "' returned no actor");
  return actor;
}

// -- built-in types -------------------------------------------------------------------------------

namespace {

Expected<int64_t> parse_int(const std::string& text, const std::string& what) {
  if (text.empty()) return invalid_argument(what + " is empty; expected an integer");
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) {
    return invalid_argument(what + " '" + text + "' is not a 64-bit integer");
  }
  return static_cast<int64_t>(v);
}

caf::behavior echo_actor(caf::event_based_actor* self) {
  report_exceptions(self);
  return {
      [](const Call& c) { return CallReply{c.payload}; },
      [](const CallBatch& batch) {
        CallBatchReply reply;
        reply.items.reserve(batch.items.size());
        for (const Call& c : batch.items) reply.items.push_back(CallReply{c.payload});
        return reply;
      },
      [](const Cast&) {},
      [](const CastBatch&) {},
  };
}

struct CounterState {
  int64_t value = 0;
};

// Applies one counter method; the new or current value as text, or why the method is refused.
Expected<std::string> counter_apply(CounterState& st, const std::string& method,
                                    const std::string& payload) {
  if (method == "add") {
    int64_t n = 1;
    if (!payload.empty()) {
      Expected<int64_t> parsed = parse_int(payload, "counter add: payload");
      if (!parsed) return parsed.status();
      n = *parsed;
    }
    st.value += n;
    return std::to_string(st.value);
  }
  if (method == "get") return std::to_string(st.value);
  return invalid_argument("counter: unknown method '" + method + "'; known: add, get");
}

caf::behavior counter_actor(caf::stateful_actor<CounterState>* self, int64_t initial) {
  report_exceptions(self);
  self->state.value = initial;
  return {
      [self](const Call& c) -> caf::result<CallReply> {
        Expected<std::string> r = counter_apply(self->state, c.method, c.payload);
        if (!r) return to_error(r.status());
        return CallReply{std::move(*r)};
      },
      [self](const CallBatch& batch) -> caf::result<CallBatchReply> {
        CallBatchReply reply;
        reply.items.reserve(batch.items.size());
        for (const Call& c : batch.items) {
          Expected<std::string> r = counter_apply(self->state, c.method, c.payload);
          if (!r) return to_error(r.status());
          reply.items.push_back(CallReply{std::move(*r)});
        }
        return reply;
      },
      [self](const Cast& c) { (void)counter_apply(self->state, c.method, c.payload); },
      [self](const CastBatch& batch) {
        for (const Cast& c : batch.items) (void)counter_apply(self->state, c.method, c.payload);
      },
  };
}

}  // namespace

Status add_builtin_types(Registry& registry) {
  TROUPE_RETURN_IF_ERROR(registry.add(
      "echo", [](caf::actor_system& sys, const std::vector<std::string>&) -> Expected<caf::actor> {
        return sys.spawn(echo_actor);
      }));
  return registry.add(
      "counter",
      [](caf::actor_system& sys, const std::vector<std::string>& args) -> Expected<caf::actor> {
        int64_t initial = 0;
        if (!args.empty()) {
          Expected<int64_t> parsed = parse_int(args[0], "counter: initial value (args[0])");
          if (!parsed) return parsed.status();
          initial = *parsed;
        }
        return sys.spawn(counter_actor, initial);
      });
}

// -- ActorTable -----------------------------------------------------------------------------------

Status ActorTable::check_free(const ActorId& id, const std::string& name) const {
  if (by_id_.count(id)) {
    return invalid_argument("actor id " + id.hex() + " is already in use on this node");
  }
  if (!name.empty() && by_name_.count(name)) {
    return invalid_argument("actor name '" + name + "' is already in use on this node (by " +
                            by_name_.at(name).short_hex() + "); names are unique per node");
  }
  return Status::ok_status();
}

void ActorTable::insert(Entry entry) {
  const ActorId id = entry.id;
  if (!entry.name.empty()) by_name_[entry.name] = id;
  by_caf_id_[entry.handle.id()] = id;
  by_id_.emplace(id, std::move(entry));
}

bool ActorTable::erase_by_caf_id(uint64_t caf_id, Entry* out) {
  auto c = by_caf_id_.find(caf_id);
  if (c == by_caf_id_.end()) return false;
  auto it = by_id_.find(c->second);
  by_caf_id_.erase(c);
  if (it == by_id_.end()) return false;
  if (!it->second.name.empty()) by_name_.erase(it->second.name);
  *out = std::move(it->second);
  by_id_.erase(it);
  return true;
}

ActorTable::Entry* ActorTable::find(const ActorId& id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

ActorTable::Entry* ActorTable::find_name(const std::string& name) {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : find(it->second);
}

std::vector<ActorTable::Entry> ActorTable::entries() const {
  std::vector<Entry> out;
  out.reserve(by_id_.size());
  for (const auto& kv : by_id_) out.push_back(kv.second);
  return out;
}

}  // namespace troupe::actors
