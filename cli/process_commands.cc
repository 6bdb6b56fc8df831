// `troupe head` and `troupe node`: the long-running processes of a cluster. `troupe up` starts them
// in the background; people rarely run them by hand (`troupe up --address` is the way to join).
#include <fstream>

#include "actors/actor_system.h"
#include "actors/head_process.h"
#include "actors/node_process.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "trainers/job/job_actors.h"

namespace troupe::cli {
namespace {

// What a head or node process hosts: the built-in actor types and those of training jobs, which
// read the node's environment (GCS address, bind address, settings) from the slot once it joined.
Status add_hosted_actor_types(std::shared_ptr<const actors::Registry>* registry,
                              std::shared_ptr<actors::NodeEnvironmentSlot>* environment) {
  auto reg = std::make_shared<actors::Registry>(actors::Registry::with_builtins());
  *environment = std::make_shared<actors::NodeEnvironmentSlot>();
  TROUPE_RETURN_IF_ERROR(job::add_job_actor_types(*reg, *environment));
  *registry = std::move(reg);
  return {};
}

}  // namespace


Runner add_head_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("head", "Run the head process of the cluster in this session (started by `troupe up`)");
  cmd->group("");  // internal: hidden from --help
  auto cpus = std::make_shared<double>(0);
  auto gpus = std::make_shared<int>(-1);
  cmd->add_option("--cpus", *cpus, "CPUs the head offers as a node (default: all)");
  cmd->add_option("--gpus", *gpus, "GPUs the head offers as a node (default: all visible)");
  return [&global, cpus, gpus]() -> int {
    Session session = Session::current();
    auto info = session.read_cluster();
    if (!info.ok()) return report_error("head", info.status());
    actors::HeadProcessOptions o;
    o.redis_host = info->redis_host;
    o.redis_port = info->redis_port;
    o.redis_password = info->redis_password;
    o.token = info->token;
    if (info->embedded_redis) {  // started by `troupe up`: the head restarts it when it dies or hangs
      o.embedded_redis = embedded_redis_options(session, *info);
      o.redis_pid_file = session.pid_file("redis");
    }
    auto hp = actors::parse_host_port(info->head_address);
    if (!hp.ok()) return report_error("head", hp.status().with_context(session.cluster_file() + ": head_address"));
    o.bind = hp->first;
    o.port = hp->second;
    if (*cpus > 0) o.resources.cpus = *cpus;
    if (*gpus >= 0) o.resources.gpus = *gpus;
    o.config = global.config;
    o.dashboard_port = static_cast<int>(global.config.dashboard_port);
    TROUPE_RETURN_IF_ERROR_CLI(add_hosted_actor_types(&o.registry, &o.environment), "head");
    install_stop_signals();
    Status st = actors::run_head(o, stop_requested());
    return st.ok() ? 0 : report_error("head", st);
  };
}

Runner add_node_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("node", "Run a node process that joins a head (started by `troupe up`)");
  cmd->group("");
  auto o = std::make_shared<actors::NodeProcessOptions>();
  auto cpus = std::make_shared<double>(0);
  auto gpus = std::make_shared<int>(-1);
  auto ready_file = std::make_shared<std::string>();
  cmd->add_option("--address", o->head_address, "host:port of the head")->required();
  cmd->add_option("--bind", o->bind, "Address this node listens on")->capture_default_str();
  cmd->add_option("--cpus", *cpus, "CPUs this node offers (default: all)");
  cmd->add_option("--gpus", *gpus, "GPUs this node offers (default: all visible)");
  cmd->add_option("--ready-file", *ready_file, "File written once the head admitted this node");
  auto join_timeout = std::make_shared<double>(10);
  cmd->add_option("--join-timeout", *join_timeout, "Seconds to keep trying to reach the head")
      ->check(CLI::PositiveNumber);
  return [&global, o, cpus, gpus, ready_file, join_timeout]() -> int {
    o->join_timeout = std::chrono::milliseconds(static_cast<int64_t>(*join_timeout * 1000));
    const char* token = std::getenv("TROUPE_TOKEN");
    if (!token || !*token) {
      return report_error("node", invalid_argument("no cluster token: set TROUPE_TOKEN (troupe up --token does)"));
    }
    o->token = token;
    if (const char* v = std::getenv("TROUPE_NODE_VERSION_OVERRIDE")) o->version = v;  // tests of the refusal
    if (*cpus > 0) o->resources.cpus = *cpus;
    if (*gpus >= 0) o->resources.gpus = *gpus;
    o->config = global.config;
    TROUPE_RETURN_IF_ERROR_CLI(add_hosted_actor_types(&o->registry, &o->environment), "node");
    install_stop_signals();
    Status st = actors::run_node(*o, stop_requested(), [&] {
      if (!ready_file->empty()) std::ofstream(*ready_file) << "joined\n";
    });
    return st.ok() ? 0 : report_error("node", st);
  };
}

}  // namespace troupe::cli
