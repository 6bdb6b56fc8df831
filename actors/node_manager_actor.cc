#include "actors/node_manager_actor.h"

#include <unistd.h>

#include <algorithm>

#include "core/logging.h"
#include "dashboard/log_tail.h"

#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "actors/actor_system.h"
#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/exit_reason.hpp"
#include "caf/system_messages.hpp"

namespace troupe::actors {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A spawn request checked against the registry and the table, ready to run.
struct CheckedSpawn {
  ActorId id;
  const SpawnRequest* req = nullptr;
  std::vector<int> gpu_ids;  // assigned before it is spawned
};

class NodeManagerActor : public caf::event_based_actor {
 public:
  NodeManagerActor(caf::actor_config& cfg, NodeManagerOptions opts)
      : caf::event_based_actor(cfg), opts_(std::move(opts)) {
    if (opts_.node.nil()) opts_.node = NodeId::random();
    if (!opts_.registry) opts_.registry = std::make_shared<const Registry>(Registry::with_builtins());
    if (!opts_.gpus) opts_.gpus = std::make_shared<GpuAssignments>(opts_.node, 0);
    node_hex_ = opts_.node.hex();
    set_down_handler([this](caf::down_msg& msg) { on_down(msg); });
  }

  caf::behavior make_behavior() override {
    return {
        [this](const SpawnRequest& req) -> caf::result<SpawnReply> {
          std::vector<SpawnReply> out;
          Status st = spawn_all({&req}, &out, /*batch=*/false);
          if (!st.ok()) return to_error(st);
          return std::move(out.front());
        },
        [this](const SpawnBatchRequest& batch) -> caf::result<SpawnBatchReply> {
          std::vector<const SpawnRequest*> reqs;
          reqs.reserve(batch.items.size());
          for (const auto& r : batch.items) reqs.push_back(&r);
          SpawnBatchReply reply;
          Status st = spawn_all(reqs, &reply.items, /*batch=*/true);
          if (!st.ok()) return to_error(st);
          return reply;
        },
        [this](const LookupRequest& req) -> caf::result<LookupReply> {
          Expected<ActorTable::Entry*> e = find(req.actor_id, req.actor_name);
          if (!e) return to_error(e.status());
          const ActorTable::Entry& entry = **e;
          return LookupReply{entry.id.hex(), entry.name, entry.type_name, entry.handle};
        },
        [this](const ListActorsRequest&) -> caf::result<ListActorsReply> {
          ListActorsReply reply;
          for (const ActorTable::Entry& e : table_.entries()) {
            reply.actors.push_back({e.id.hex(), e.name, e.type_name,
                                    std::vector<int32_t>(e.gpu_ids.begin(), e.gpu_ids.end()), e.handle});
          }
          return reply;
        },
        [this](const StopRequest& req) -> caf::result<StopReply> {
          Expected<ActorTable::Entry*> e = find(req.actor_id, "");
          if (!e) return to_error(e.status());
          ActorTable::Entry& entry = **e;
          entry.stop_reason = req.reason.empty() ? "stop requested" : req.reason;
          send_exit(entry.handle, caf::exit_reason::user_shutdown);
          return StopReply{entry.id.hex()};
        },
        [](const TailLogRequest& req) -> caf::result<TailLogReply> {
          // Its own process's log (core/logging.h): the node is the one host that can read it.
          dashboard::TailOptions o;
          o.needles = req.needles;
          o.lines = static_cast<size_t>(std::min<uint64_t>(req.lines, 5000));
          o.max_scan_bytes = static_cast<size_t>(std::min<uint64_t>(req.max_scan_bytes, 64u << 20));
          o.max_line_bytes = static_cast<size_t>(std::min<uint64_t>(req.max_line_bytes, 1u << 16));
          const std::string& path = log_file_path();
          if (path.empty()) return to_error(not_found("this node process logs to no file"));
          auto tail = dashboard::tail_file(path, o);
          if (!tail.ok()) return to_error(tail.status());
          return TailLogReply{path, std::move(tail->lines), tail->scanned_all, tail->file_bytes};
        },
        [this](const ShutdownNode& req) -> caf::result<ShutdownNodeReply> {
          if (!opts_.on_shutdown) return to_error(unavailable("node " + node_hex_.substr(0, 8) + " cannot be shut down remotely"));
          opts_.on_shutdown(req.reason.empty() ? "shutdown requested" : req.reason);
          return ShutdownNodeReply{static_cast<int32_t>(::getpid())};
        },
        [this](const Ping& ping) {
          return Heartbeat{node_hex_, ping.seq, now_ms(), static_cast<uint64_t>(table_.size())};
        },
    };
  }

  void on_exit() override {
    // Our actors do not outlive us: stop each and report it, since their down messages will find
    // no one to receive them.
    for (ActorTable::Entry& e : table_.entries()) {
      send_exit(e.handle, caf::exit_reason::user_shutdown);
      report(e, gcs::ActorState::finished, false, "node manager " + node_hex_.substr(0, 8) + " shut down");
      opts_.gpus->release(e.id);
    }
    event_based_actor::on_exit();
  }

 private:
  // Checks every request first (types, ids, names, duplicates within the batch), then gives each
  // its GPUs, then spawns all. If a GPU demand does not fit or a factory fails midway, the devices
  // taken and the actors of this batch already spawned are given back and stopped again, so the
  // caller gets all or nothing. ALIVE is reported only once the whole batch stands.
  Status spawn_all(const std::vector<const SpawnRequest*>& reqs, std::vector<SpawnReply>* out,
                   bool batch) {
    auto where = [&](size_t i) {
      const SpawnRequest& r = *reqs[i];
      std::string s = batch ? "spawn batch item " + std::to_string(i) + " of " +
                                  std::to_string(reqs.size()) + " (type '" + r.type_name + "'"
                            : "spawn (type '" + r.type_name + "'";
      if (!r.actor_name.empty()) s += ", name '" + r.actor_name + "'";
      return s + ") on node " + node_hex_.substr(0, 8);
    };
    std::vector<CheckedSpawn> checked;
    checked.reserve(reqs.size());
    std::set<ActorId> batch_ids;
    std::set<std::string> batch_names;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const SpawnRequest& r = *reqs[i];
      if (!opts_.registry->contains(r.type_name)) {
        return not_found("unknown actor type '" + r.type_name + "'; known types: " +
                         opts_.registry->type_list())
            .with_context(where(i));
      }
      ActorId id = ActorId::random();
      if (!r.actor_id.empty()) {
        Expected<ActorId> parsed = ActorId::from_hex(r.actor_id);
        if (!parsed) return parsed.status().with_context(where(i));
        id = *parsed;
      }
      TROUPE_RETURN_IF_ERROR(table_.check_free(id, r.actor_name).with_context(where(i)));
      if (!batch_ids.insert(id).second) {
        return invalid_argument("actor id " + id.hex() + " appears twice in the batch")
            .with_context(where(i));
      }
      if (!r.actor_name.empty() && !batch_names.insert(r.actor_name).second) {
        return invalid_argument("actor name '" + r.actor_name + "' appears twice in the batch")
            .with_context(where(i));
      }
      checked.push_back({id, &r, {}});
    }
    // Devices before actors: a batch whose GPUs do not fit spawns nothing, and each actor finds
    // its devices (GpuAssignments::devices_of) from its first moment.
    auto give_back_gpus = [&](size_t n) {
      for (size_t j = 0; j < n; ++j) opts_.gpus->release(checked[j].id);
    };
    for (size_t i = 0; i < checked.size(); ++i) {
      Expected<std::vector<int>> devices = opts_.gpus->assign(checked[i].id, checked[i].req->gpus);
      if (!devices) {
        give_back_gpus(i);
        return devices.status().with_context(where(i));
      }
      checked[i].gpu_ids = std::move(*devices);
    }
    out->clear();
    out->reserve(checked.size());
    for (size_t i = 0; i < checked.size(); ++i) {
      const SpawnRequest& r = *checked[i].req;
      Expected<caf::actor> a = opts_.registry->spawn(system(), r.type_name, r.args);
      if (!a) {
        for (size_t j = 0; j < i; ++j) {
          ActorTable::Entry gone;
          const caf::actor& h = (*out)[j].handle;
          demonitor(h);
          table_.erase_by_caf_id(h.id(), &gone);
          send_exit(h, caf::exit_reason::user_shutdown);
        }
        give_back_gpus(checked.size());
        out->clear();
        return a.status().with_context(where(i));
      }
      monitor(*a);
      table_.insert({checked[i].id, r.actor_name, r.type_name, *a, "", checked[i].gpu_ids});
      out->push_back(SpawnReply{checked[i].id.hex(), r.actor_name, *a, checked[i].gpu_ids});
    }
    for (const CheckedSpawn& c : checked) {
      report(*table_.find(c.id), gcs::ActorState::alive, false, "spawned");
    }
    return Status::ok_status();
  }

  Expected<ActorTable::Entry*> find(const std::string& id_hex, const std::string& name) {
    const std::string node = " on node " + node_hex_.substr(0, 8);
    if (id_hex.empty()) {
      if (name.empty()) return invalid_argument("lookup names neither an actor id nor a name");
      ActorTable::Entry* e = table_.find_name(name);
      if (!e) return not_found("no live actor named '" + name + "'" + node);
      return e;
    }
    Expected<ActorId> id = ActorId::from_hex(id_hex);
    if (!id) return id.status();
    ActorTable::Entry* e = table_.find(*id);
    if (!e) return not_found("no live actor " + id_hex + node + " (never spawned here, or exited)");
    return e;
  }

  void on_down(const caf::down_msg& msg) {
    ActorTable::Entry entry;
    if (!table_.erase_by_caf_id(msg.source.id(), &entry)) return;  // rolled back or not ours
    opts_.gpus->release(entry.id);  // before the report: a respawn the report prompts finds them free
    const caf::error& why = msg.reason;
    if (!why || why == caf::exit_reason::normal) {
      report(entry, gcs::ActorState::finished, false, kExitedNormally);
    } else if (why == caf::exit_reason::user_shutdown) {
      report(entry, gcs::ActorState::finished, false,
             entry.stop_reason.empty() ? "shut down" : "stopped: " + entry.stop_reason);
    } else if (why == caf::exit_reason::kill) {
      report(entry, gcs::ActorState::dead, false, "killed");
    } else {
      report(entry, gcs::ActorState::dead, true, kCrashedPrefix + describe(system(), why));
    }
  }

  void report(const ActorTable::Entry& e, gcs::ActorState state, bool crashed, std::string reason) {
    if (!opts_.on_state_change) return;
    opts_.on_state_change(ActorStateChange{e.id.hex(), e.name, e.type_name, node_hex_, state,
                                           crashed, std::move(reason), now_ms(), e.gpu_ids});
  }

  NodeManagerOptions opts_;
  std::string node_hex_;
  ActorTable table_;
};

}  // namespace

caf::actor spawn_node_manager(caf::actor_system& sys, NodeManagerOptions options) {
  return sys.spawn<NodeManagerActor>(std::move(options));
}

}  // namespace troupe::actors
