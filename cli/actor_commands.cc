// `troupe spawn` and `troupe call`: actors on the cluster from the command line. spawn asks the
// head to place and start actors of a registered type; call sends a Call to actors (all ALIVE ones
// with --all) through their nodes' node managers and counts the answers.
#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "actors/actor_system.h"
#include "actors/blocking_request.h"
#include "actors/head_messages.h"
#include "actors/node_manager_client.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace {

constexpr auto kTimeout = std::chrono::seconds(30);

Expected<std::unique_ptr<actors::ActorSystem>> client_system() {
  actors::ActorSystemOptions o;
  return actors::ActorSystem::start(o);
}

}  // namespace

Runner add_spawn_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("spawn", "Place and start actors of a registered type on the cluster");
  auto s = std::make_shared<actors::SpawnActors>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("type", s->type_name, "Registered actor type (built-ins: echo, counter)")->required();
  cmd->add_option("--count", s->count, "How many")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--cpus", s->cpus, "CPUs each actor needs")->check(CLI::NonNegativeNumber);
  cmd->add_option("--gpus", s->gpus, "GPUs each actor needs")->check(CLI::NonNegativeNumber);
  cmd->add_option("--policy", s->policy, "spread or pack (default: setting scheduler_policy)")
      ->check(CLI::IsMember({"spread", "pack"}));
  cmd->add_option("--gang", s->gang, "Place all of them or none, as one group");
  cmd->add_option("--node", s->node_id, "Place them on this node (id, hex)");
  cmd->add_option("--name-prefix", s->name_prefix, "Name them <prefix>0, <prefix>1, ...");
  cmd->add_option("--args", s->args, "Arguments for the actor type's factory");
  cmd->add_flag("--json", *json, "Print one JSON object");
  return [s, json]() -> int {
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("spawn", info.status());
    auto hp = actors::parse_host_port(info->head_address);
    if (!hp.ok()) return report_error("spawn", hp.status());
    auto sys = client_system();
    if (!sys.ok()) return report_error("spawn", sys.status());
    auto head = (*sys)->connect(hp->first, hp->second);
    if (!head.ok()) return report_error("spawn", head.status().with_context("reaching the head"));
    auto reply = actors::request_blocking<actors::SpawnActorsReply>((*sys)->system(), *head, kTimeout, *s,
                                                                    "spawning " + s->type_name + " actors");
    if (!reply.ok()) return report_error("spawn", reply.status());
    if (*json) {
      nlohmann::json j{{"actor_ids", reply->actor_ids}, {"started", reply->started},
                       {"pending_reasons", reply->pending_reasons}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("started %d of %d '%s' actors\n", reply->started, s->count, s->type_name.c_str());
      for (const auto& r : reply->pending_reasons) std::printf("  PENDING %s\n", r.c_str());
    }
    return 0;
  };
}

Runner add_call_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("call", "Send a call to actors and count the answers");
  auto ids = std::make_shared<std::vector<std::string>>();
  auto all = std::make_shared<bool>(false);
  auto method = std::make_shared<std::string>("ping");
  auto payload = std::make_shared<std::string>("hello");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("actors", *ids, "Actor ids (hex) or names");
  cmd->add_flag("--all", *all, "Every ALIVE actor of the cluster");
  cmd->add_option("--method", *method, "Method name")->capture_default_str();
  cmd->add_option("--payload", *payload, "Payload text")->capture_default_str();
  cmd->add_flag("--json", *json, "Print one JSON object");
  return [ids, all, method, payload, json]() -> int {
    if (ids->empty() && !*all) return report_error("call", invalid_argument("name actor ids or pass --all"));
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("call", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("call", store.status());
    auto actor_list = gcs::Table<gcs::ActorRecord>(**store).list();
    if (!actor_list.ok()) return report_error("call", actor_list.status());
    auto node_list = gcs::Table<gcs::NodeRecord>(**store).list();
    if (!node_list.ok()) return report_error("call", node_list.status());
    std::map<NodeId, std::string> node_address;
    for (const auto& n : *node_list) node_address[n.id] = n.address;
    std::vector<gcs::ActorRecord> targets;
    for (const auto& a : *actor_list) {
      bool wanted = *all ? a.state == gcs::ActorState::alive
                         : std::find(ids->begin(), ids->end(), a.id.hex()) != ids->end() ||
                               (!a.name.empty() && std::find(ids->begin(), ids->end(), a.name) != ids->end());
      if (wanted) targets.push_back(a);
    }
    if (!*all && targets.size() != ids->size()) {
      return report_error("call", not_found("found " + std::to_string(targets.size()) + " of the " +
                                            std::to_string(ids->size()) + " actors named (by id or name) in the GCS"));
    }
    auto sys = client_system();
    if (!sys.ok()) return report_error("call", sys.status());
    std::map<NodeId, caf::actor> managers;
    nlohmann::json failed = nlohmann::json::array();
    int answered = 0;
    for (const auto& a : targets) {
      Status st;
      auto nm = managers.find(a.node);
      if (nm == managers.end()) {
        auto hp = actors::parse_host_port(node_address[a.node]);
        auto handle = hp.ok() ? (*sys)->connect(hp->first, hp->second) : Expected<caf::actor>(hp.status());
        if (handle.ok()) nm = managers.emplace(a.node, *handle).first;
        else st = handle.status();
      }
      if (st.ok()) {
        auto found = actors::NodeManagerClient((*sys)->system(), nm->second, kTimeout).lookup(a.id);
        st = found.status();
        if (found.ok()) {
          auto reply = actors::call((*sys)->system(), found->handle, actors::Call{*method, *payload}, kTimeout);
          st = reply.status();
        }
      }
      if (st.ok()) ++answered;
      else failed.push_back({{"id", a.id.hex()}, {"error", st.to_string()}});
    }
    if (*json) {
      std::printf("%s\n", nlohmann::json{{"total", targets.size()}, {"answered", answered}, {"failed", failed}}.dump().c_str());
    } else {
      std::printf("%d of %zu actors answered\n", answered, targets.size());
      for (const auto& f : failed) std::printf("  %s: %s\n", f["id"].get<std::string>().c_str(), f["error"].get<std::string>().c_str());
    }
    return failed.empty() ? 0 : kExitFailure;
  };
}

}  // namespace troupe::cli
