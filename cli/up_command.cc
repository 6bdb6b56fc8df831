// `troupe up`: brings a cluster up here — the embedded redis-server (unless --redis), the head and
// --nodes local node processes, all in the background — and returns once every one is ALIVE in the
// GCS. With --address and --token it instead joins this machine to a head elsewhere as a node. With
// --slurm it runs inside a Slurm allocation: the head here on the allocation's first node, a node
// process on every other node as a step of the allocation (srun), each offering its allocated CPUs.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/cluster_commands.h"
#include "cli/cluster_file.h"
#include "cli/commands.h"
#include "cli/slurm_allocation.h"
#include "core/process.h"
#include "core/version.h"
#include "gcs/events.h"
#include "gcs/redis_server.h"
#include "gcs/tables.h"
#include "tls/pki.h"
#include "tls/tls_context.h"

namespace troupe::cli {

std::vector<std::string> resource_args(std::optional<double> cpus, std::optional<int> gpus);

namespace {

using Clock = std::chrono::steady_clock;

struct UpFlags {
  int nodes = 0;
  double cpus = 0;
  int gpus = -1;
  std::string redis;             // host:port of an existing server
  std::string redis_password;
  std::string bind = "127.0.0.1";
  bool bind_given = false;
  int port = 0;                  // head service port
  std::string address, token;    // join mode
  double timeout_s = 30;
  std::string cluster_file;      // CLUSTER.yaml
  bool restart_head = false;     // start this session's head again (it died); the rest stays
  bool slurm = false;            // inside a Slurm allocation: one node per allocated node
  bool tls = false;              // TLS between every process (a CA made in the session, or tls_*)
  std::string tls_ca, tls_cert, tls_key;
  bool tls_stdin = false;        // join: the CA, certificate and key arrive on stdin (the ssh provider)
};

std::string absolute_path(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).string();
}

std::string tail_of(const std::string& path, int lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  std::string line;
  while (std::getline(f, line)) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "\n    " + all[i];
  }
  return out;
}

// Starts `troupe <args>` in the background as `role`, with its pid file and log.
Expected<pid_t> start_role(const Session& s, const std::string& role, std::vector<std::string> args,
                           std::vector<std::string> env) {
  SpawnOptions o;
  o.argv = {self_executable()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_file = s.log_file(role);
  o.env = std::move(env);
  auto pid = spawn_process(o);
  if (!pid.ok()) return pid.status();
  TROUPE_RETURN_IF_ERROR(write_pid_file(s.pid_file(role), *pid));
  return pid;
}

// Waits until `want` nodes are ALIVE in the GCS, or a started process died, or the deadline.
Status wait_alive(gcs::Store& store, size_t want, const Session& s, Clock::time_point deadline) {
  size_t alive = 0;
  while (Clock::now() < deadline) {
    auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
    if (nodes.ok()) {
      alive = 0;
      for (const auto& n : *nodes) alive += n.state == gcs::NodeState::alive;
      if (alive >= want) return {};
    }
    for (const SessionProcess& p : s.processes()) {
      if (!p.alive) {
        return unavailable(p.role + " (pid " + std::to_string(p.pid) + ") exited while the cluster came up; its log " +
                           s.log_file(p.role) + " ends:" + tail_of(s.log_file(p.role), 8));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status(Code::timeout, std::to_string(alive) + " of " + std::to_string(want) +
                                   " nodes ALIVE after the deadline; see `troupe logs`");
}

void stop_all(const Session& s) {
  for (const SessionProcess& p : s.processes()) (void)stop_process(p.pid, std::chrono::milliseconds(2000));
  (void)s.clear();
}

int join(const UpFlags& f, GlobalOptions&) {
  Session s = Session::current();
  TROUPE_RETURN_IF_ERROR_CLI(s.create(), "up");
  // The first node-N role of this session whose process is not running (joins may repeat).
  int n = 1;
  for (;; ++n) {
    auto pid = read_pid_file(s.pid_file("node-" + std::to_string(n)));
    if (!pid.ok() || !process_alive(*pid)) break;
  }
  const std::string role = "node-" + std::to_string(n);
  const std::string ready = s.dir() + "/pids/" + role + ".ready";
  std::remove(ready.c_str());
  char join_timeout[32];
  std::snprintf(join_timeout, sizeof join_timeout, "%g", f.timeout_s);
  std::vector<std::string> args{"node", "--address", f.address, "--bind", f.bind, "--ready-file", ready,
                                "--join-timeout", join_timeout};
  if (f.cpus > 0) args.insert(args.end(), {"--cpus", std::to_string(f.cpus)});
  if (f.gpus >= 0) args.insert(args.end(), {"--gpus", std::to_string(f.gpus)});
  std::vector<std::string> env{"TROUPE_TOKEN=" + f.token};
  tls::TlsFiles given{f.tls_ca, f.tls_cert, f.tls_key};  // made absolute with the flags
  if (f.tls_stdin) {
    // `up CLUSTER.yaml --tls` with the ssh provider sends this host's files through ssh's stdin: kept
    // in this session (0700, the key 0600), never on a command line.
    std::stringstream in;
    in << std::cin.rdbuf();
    auto unpacked = tls::unpack_bundle(in.str(), s.dir() + "/tls");
    if (!unpacked.ok()) return report_error("up", unpacked.status().with_context("--tls-stdin"));
    given = *unpacked;
  }
  if (given.enabled()) {
    const tls::TlsFiles& files = given;
    auto checked = tls::TlsContext::load(files);
    if (!checked.ok()) return report_error("up", checked.status().with_context("joining with TLS"));
    for (const std::string& e : tls::env_entries(files)) env.push_back(e);
  }
  auto pid = start_role(s, role, args, env);
  if (!pid.ok()) return report_error("up", pid.status());
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  while (Clock::now() < deadline) {
    if (std::ifstream(ready)) {
      std::printf("joined the cluster at %s as %s (pid %d); log: %s\n", f.address.c_str(), role.c_str(),
                  static_cast<int>(*pid), s.log_file(role).c_str());
      return 0;
    }
    if (!process_alive(*pid)) {
      std::remove(s.pid_file(role).c_str());
      return report_error("up", unavailable("the node could not join " + f.address + "; its log ends:" +
                                            tail_of(s.log_file(role), 6)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (void)stop_process(*pid, std::chrono::milliseconds(2000));
  std::remove(s.pid_file(role).c_str());
  return report_error("up", Status(Code::timeout, "the node did not join " + f.address + " within " +
                                                      join_timeout + " s; its log " + s.log_file(role) + " ends:" +
                                                      tail_of(s.log_file(role), 3)));
}

// `troupe up --restart-head`: this session's head process died (killed, crashed) while its GCS and
// nodes live on. Starts the head again at the same address with the same token: the nodes register
// again by themselves, and the head supervises the jobs it finds running in the GCS. Returns once
// the new head's own node is ALIVE.
int restart_head(const UpFlags& f) {
  Session s = Session::current();
  auto info = s.read_cluster();
  if (!info.ok()) return report_error("up", info.status().with_context("--restart-head: no cluster here to restart the head of"));
  for (const SessionProcess& p : s.processes()) {
    if (p.role == "head" && p.alive)
      return report_error("up", invalid_argument("--restart-head: the head (pid " + std::to_string(p.pid) +
                                                 ") is running; stop it first or use `troupe down`"));
  }
  auto store = connect_gcs(*info);
  auto redis_pid = read_pid_file(s.pid_file("redis"));
  if (!store.ok() && info->embedded_redis && !(redis_pid.ok() && process_alive(*redis_pid))) {
    // The embedded GCS died with the head (nobody watched it meanwhile): start it again from its
    // append-only file, as the head's watchdog would have.
    auto redis = gcs::RedisServer::start(embedded_redis_options(s, *info));
    if (!redis.ok()) return report_error("up", redis.status().with_context("--restart-head: starting the embedded "
                                                                          "redis-server again"));
    (void)write_pid_file(s.pid_file("redis"), (*redis)->pid());
    std::printf("the embedded redis-server was not running: started it again (pid %d) from %s\n",
                static_cast<int>((*redis)->pid()), s.redis_dir().c_str());
    store = connect_gcs(*info);
  }
  if (!store.ok()) return report_error("up", store.status().with_context("--restart-head: the cluster's GCS"));
  std::vector<std::string> args{"head"};
  std::optional<double> cpus = f.cpus > 0 ? std::optional<double>(f.cpus) : std::nullopt;
  std::optional<int> gpus = f.gpus >= 0 ? std::optional<int>(f.gpus) : std::nullopt;
  // Without --cpus/--gpus the head's node offers what the head it replaces offered.
  if (auto before = gcs::Table<gcs::NodeRecord>(**store).list(); before.ok()) {
    const gcs::NodeRecord* last = nullptr;
    for (const gcs::NodeRecord& n : *before)
      if (n.is_head && (!last || n.started_ms > last->started_ms)) last = &n;
    if (last && !cpus) cpus = last->total.cpus;
    if (last && !gpus) gpus = static_cast<int>(last->total.gpus);
  }
  for (const auto& a : resource_args(cpus, gpus)) args.push_back(a);
  auto head = start_role(s, "head", args, {});
  if (!head.ok()) return report_error("up", head.status());
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  while (Clock::now() < deadline) {
    auto nodes = gcs::Table<gcs::NodeRecord>(**store).list();
    if (nodes.ok()) {
      for (const gcs::NodeRecord& n : *nodes) {
        if (n.pid != *head || n.state != gcs::NodeState::alive) continue;
        std::printf("head restarted at %s (pid %d); its nodes register again and running jobs are supervised "
                    "again\n", info->head_address.c_str(), static_cast<int>(*head));
        return 0;
      }
    }
    if (!process_alive(*head))
      return report_error("up", unavailable("the restarted head exited; its log " + s.log_file("head") +
                                            " ends:" + tail_of(s.log_file("head"), 8)));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return report_error("up", Status(Code::timeout, "the restarted head was not ALIVE within the deadline; see " +
                                                      s.log_file("head")));
}


// `--tls`: the files this cluster's processes use, put into this process's environment (the GCS
// readiness check below and every process started from here inherit them). Given --tls-ca/-cert/
// -key: those (checked). Otherwise a new CA in the session's tls/ directory and the head host's
// member certificate, for the addresses it is reached at (bind, loopback, host name).
Expected<tls::TlsFiles> setup_tls(const Session& s, const UpFlags& f) {
  tls::TlsFiles files{f.tls_ca, f.tls_cert, f.tls_key};
  if (!files.enabled()) {
    const std::string dir = s.dir() + "/tls";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // a new cluster, a new CA
    TROUPE_RETURN_IF_ERROR(tls::make_ca(dir, "session " + s.dir()));
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    auto issued = tls::issue_member(dir, dir, "head", {f.bind, "127.0.0.1", "localhost", host});
    if (!issued.ok()) return issued.status();
    files = *issued;
  }
  auto checked = tls::TlsContext::load(files);
  if (!checked.ok()) return checked.status().with_context("--tls");
  tls::set_environment(files, true);
  return files;
}

// `--slurm`: the allocation's nodes, this process on the first (where the head runs). The head binds
// to the first node's address and offers its allocated CPUs unless --bind / --cpus say otherwise.
Expected<SlurmAllocation> slurm_setup(UpFlags* f) {
  auto a = read_slurm_allocation();
  if (!a.ok()) return a.status();
  const SlurmNode& first = a->nodes.front();
  if (a->this_node != first.name) {
    const std::string here = a->this_node.empty() ? "outside the allocation's steps (SLURMD_NODENAME is not set)"
                                                  : "on node " + a->this_node;
    return invalid_argument("--slurm: the head runs on the allocation's first node, " + first.name +
                            ", but this process runs " + here + "; run `troupe up --slurm` in the batch script, or "
                            "from salloc through `srun --overlap -N1 -n1 -w " + first.name + " --pty bash`");
  }
  if (!f->bind_given) f->bind = first.address;
  if (f->cpus > 0) {
    for (SlurmNode& n : a->nodes) n.cpus = f->cpus;  // --cpus: what every node offers
  }
  f->cpus = first.cpus;
  return a;
}

// Starts the node process of every allocated node but the first (the head's) as a step of the
// allocation; the session keeps each srun's pid as role node-<NodeName>.
Status start_slurm_nodes(const Session& s, const SlurmAllocation& a, const ClusterInfo& info, int gpus) {
  for (size_t i = 1; i < a.nodes.size(); ++i) {
    const std::string role = "node-" + a.nodes[i].name;
    SpawnOptions o;
    o.argv = srun_node_command(a, a.nodes[i], self_executable(), info.head_address);
    if (gpus >= 0) o.argv.insert(o.argv.end(), {"--gpus", std::to_string(gpus)});
    o.log_file = s.log_file(role);
    o.env = {"TROUPE_TOKEN=" + info.token};
    auto pid = spawn_process(o);
    if (!pid.ok()) return pid.status().with_context("--slurm: starting the node on " + a.nodes[i].name + " with srun");
    TROUPE_RETURN_IF_ERROR(write_pid_file(s.pid_file(role), *pid));
  }
  return {};
}

}  // namespace

int up_cluster(const UpFlags& f, GlobalOptions& global, const ClusterSpec* spec);

Runner add_up_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("up", "Bring a cluster up here (redis, head, --nodes N), or join one (--address)");
  auto f = std::make_shared<UpFlags>();
  cmd->add_option("--nodes", f->nodes, "Local node processes to start besides the head")->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--cpus", f->cpus, "CPUs each node (and the head) offers (default: all)")->check(CLI::PositiveNumber);
  cmd->add_option("--gpus", f->gpus, "GPUs each node (and the head) offers (default: all visible)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--redis", f->redis, "Use this redis-server (host:port) instead of starting one");
  cmd->add_option("--redis-password", f->redis_password, "Password of the --redis server");
  auto* bind = cmd->add_option("--bind", f->bind, "Address the head and nodes listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "Port of the head (0: pick a free one)")->check(CLI::Range(0, 65535));
  cmd->add_option("--address", f->address, "Join the head at host:port as a node instead");
  cmd->add_option("--token", f->token, "The cluster's join token (with --address)");
  cmd->add_option("cluster_file", f->cluster_file, "CLUSTER.yaml describing the cluster (see examples/clusters/)");
  cmd->add_option("--timeout", f->timeout_s, "Seconds to wait for the cluster to be ready")->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--restart-head", f->restart_head,
                "Start this session's head again after it died (same address and token); nodes re-register and "
                "running jobs are supervised again");
  cmd->add_flag("--tls", f->tls,
                "TLS with mutual authentication between every process (head, nodes, GCS, data plane, dashboard): "
                "a cluster CA is made in the session unless --tls-ca/--tls-cert/--tls-key give one");
  cmd->add_option("--tls-ca", f->tls_ca, "The cluster CA's certificate (PEM): with --tls, or to join a TLS cluster");
  cmd->add_option("--tls-cert", f->tls_cert, "This host's certificate, signed by the cluster CA (`troupe tls issue`)");
  cmd->add_option("--tls-key", f->tls_key, "The private key of --tls-cert");
  cmd->add_flag("--tls-stdin", f->tls_stdin,
                "Joining: read the CA certificate, this host's certificate and its key (PEM, in that order) from "
                "stdin and keep them in the session (what `up CLUSTER.yaml --tls` sends over ssh)");
  cmd->add_flag("--slurm", f->slurm,
                "Inside a Slurm allocation (sbatch, or salloc + srun): the head here on its first node, a node "
                "process on every other node as a step (srun), resources from the allocation");
  return [f, &global, bind]() -> int {
    f->bind_given = bind->count() > 0;
    const int tls_files = !f->tls_ca.empty() + !f->tls_cert.empty() + !f->tls_key.empty();
    if (tls_files != 0 && tls_files != 3)
      return report_error("up", invalid_argument("--tls-ca, --tls-cert and --tls-key go together"));
    if (f->tls_stdin && (f->address.empty() || tls_files != 0))
      return report_error("up", invalid_argument("--tls-stdin is for joining (--address), instead of the --tls-* files"));
    if (f->tls && !f->address.empty())
      return report_error("up", invalid_argument("joining a TLS cluster takes --tls-ca/--tls-cert/--tls-key, not --tls "
                                                 "(`troupe tls issue` on the head's host makes them)"));
    if (tls_files == 3 && f->address.empty()) f->tls = true;
    f->tls_ca = absolute_path(f->tls_ca);
    f->tls_cert = absolute_path(f->tls_cert);
    f->tls_key = absolute_path(f->tls_key);
    if (f->restart_head) return restart_head(*f);
    if (f->slurm) {
      if (!f->address.empty() || !f->cluster_file.empty() || f->nodes) {
        return report_error("up", invalid_argument("--slurm takes its nodes from the allocation; drop --address, "
                                                   "--nodes and the cluster file"));
      }
      return up_cluster(*f, global, nullptr);
    }
    if (!f->address.empty()) {
      if (f->token.empty()) return report_error("up", invalid_argument("--address needs --token (printed by `troupe up` on the head)"));
      return join(*f, global);
    }
    if (!f->cluster_file.empty()) {
      if (f->nodes || !f->redis.empty()) {
        return report_error("up", invalid_argument("a cluster file describes the nodes and redis; drop --nodes/--redis"));
      }
      auto spec = load_cluster_file(f->cluster_file);
      if (!spec.ok()) return report_error("up", spec.status());
      UpFlags g = *f;
      g.bind = spec->head.bind;
      g.port = spec->head.port;
      if (spec->redis) {
        g.redis = spec->redis->address;
        g.redis_password = spec->redis->password;
      }
      return up_cluster(g, global, &*spec);
    }
    return up_cluster(*f, global, nullptr);
  };
}

// Resource flags for one process: --cpus / --gpus when set.
std::vector<std::string> resource_args(std::optional<double> cpus, std::optional<int> gpus) {
  std::vector<std::string> out;
  if (cpus) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *cpus);
    out.insert(out.end(), {"--cpus", buf});
  }
  if (gpus) out.insert(out.end(), {"--gpus", std::to_string(*gpus)});
  return out;
}

// Runs the ssh join command of every remote node; each returns once its node joined.
Status join_over_ssh(const Session& s, const ClusterSpec& spec, const std::vector<NodeLaunch>& plan,
                     const ClusterInfo& info, Clock::time_point deadline) {
  for (const NodeLaunch& l : plan) {
    const std::string log = s.log_file("ssh-" + *l.host);
    SpawnOptions o;
    std::vector<std::string> extra;
    if (info.tls.enabled()) {
      // The host's own certificate (for its address), issued here and sent through ssh's stdin.
      const std::string dir = s.dir() + "/tls/hosts/" + *l.host;
      auto issued = tls::issue_member(s.dir() + "/tls", dir, "node", {*l.host});
      auto bundle = issued.ok() ? tls::bundle_of(*issued) : Expected<std::string>(issued.status());
      if (!bundle.ok()) return bundle.status().with_context("TLS files for " + *l.host);
      o.stdin_file = dir + "/bundle.pem";
      std::ofstream(o.stdin_file) << *bundle;
      ::chmod(o.stdin_file.c_str(), 0600);
      extra.push_back("--tls-stdin");
    }
    o.argv = ssh_join_command(spec, l, info.head_address, info.token, extra);
    o.log_file = log;
    o.detach = false;
    auto pid = spawn_process(o);
    if (!pid.ok()) return pid.status().with_context("ssh to " + *l.host);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto code = wait_process(*pid, std::max(left, std::chrono::milliseconds(1)));
    if (!code.ok()) {
      (void)stop_process(*pid, std::chrono::milliseconds(1000));
      return code.status().with_context("joining node " + *l.host + " over ssh");
    }
    if (*code != 0) {
      return unavailable("joining node " + *l.host + " over ssh failed (exit " + std::to_string(*code) +
                         "); its output " + log + " ends:" + tail_of(log, 6));
    }
  }
  return {};
}

namespace {

// A second cluster is refused while this session's head runs.
Status check_no_head_up(const Session& s) {
  if (auto existing = s.read_cluster(); existing.ok()) {
    for (const SessionProcess& p : s.processes()) {
      if (p.role == "head" && p.alive) {
        return invalid_argument("a cluster is already up here (head pid " + std::to_string(p.pid) + ", session " +
                                s.dir() + "); run `troupe down` first");
      }
    }
  }
  return {};
}

// The GCS of the new cluster: the --redis server, else an embedded redis-server started in the
// session (on the address the head listens on, with the cluster's TLS), noted in *info.
Status start_gcs(const Session& s, const UpFlags& f, ClusterInfo* info) {
  if (!f.redis.empty()) {
    auto colon = f.redis.rfind(':');
    if (colon == std::string::npos) return invalid_argument("--redis '" + f.redis + "' is not host:port");
    info->redis_host = f.redis.substr(0, colon);
    info->redis_port = std::atoi(f.redis.c_str() + colon + 1);
    info->redis_password = f.redis_password;
    info->embedded_redis = false;
    return {};
  }
  gcs::RedisServerOptions ro;
  ro.session_dir = s.redis_dir();
  ro.bind = f.bind;  // nodes on other hosts reach the GCS at the address the head listens on
  ro.detach = true;
  ro.tls = info->tls;
  auto redis = gcs::RedisServer::start(ro);
  if (!redis.ok()) return redis.status().with_context("starting the embedded redis-server");
  info->redis_host = f.bind;
  info->redis_port = (*redis)->port();
  info->redis_password = (*redis)->password();
  (void)write_pid_file(s.pid_file("redis"), (*redis)->pid());
  return {};
}

// The new cluster's description (its token, TLS files and GCS), with the GCS started.
Expected<ClusterInfo> new_cluster(const Session& s, const UpFlags& f, const ClusterSpec* spec,
                                  const std::optional<SlurmAllocation>& slurm) {
  ClusterInfo info;
  if (f.tls) {
    auto files = setup_tls(s, f);
    if (!files.ok()) return files.status();
    info.tls = *files;
  }
  info.version = TROUPE_VERSION_STRING;
  info.token = random_token();
  info.started_ms = gcs::now_ms();
  if (spec) info.cluster_file = std::filesystem::absolute(f.cluster_file).string();
  if (slurm) info.slurm_job = slurm->job_id;
  TROUPE_RETURN_IF_ERROR(start_gcs(s, f, &info));
  return info;
}

std::optional<double> flag_cpus(const UpFlags& f) { return f.cpus > 0 ? std::optional<double>(f.cpus) : std::nullopt; }
std::optional<int> flag_gpus(const UpFlags& f) { return f.gpus >= 0 ? std::optional<int>(f.gpus) : std::nullopt; }

// What to start: --nodes N identical local nodes, the cluster file's launch plan, or one node on
// every node of the Slurm allocation but the first (the head's).
std::vector<NodeLaunch> node_plan(const UpFlags& f, const ClusterSpec* spec, const std::optional<SlurmAllocation>& slurm) {
  std::vector<NodeLaunch> plan;
  if (spec) {
    plan = launch_plan(*spec);
  } else if (slurm) {
    for (size_t i = 1; i < slurm->nodes.size(); ++i) plan.push_back({"node", slurm->nodes[i].name, slurm->nodes[i].cpus, flag_gpus(f)});
  } else {
    for (int i = 0; i < f.nodes; ++i) plan.push_back({"node", std::nullopt, flag_cpus(f), flag_gpus(f)});
  }
  return plan;
}

std::vector<std::string> head_args(const UpFlags& f, const ClusterSpec* spec) {
  std::vector<std::string> args{"head"};
  for (const auto& a : spec ? resource_args(spec->head.cpus, spec->head.gpus) : resource_args(flag_cpus(f), flag_gpus(f))) {
    args.push_back(a);
  }
  return args;
}

// What `troupe up` prints once the cluster is up: its processes, how to join it, where to look.
void print_cluster_up(const Session& s, gcs::Store& store, const ClusterInfo& info, const std::string& label,
                      double secs, size_t nodes, pid_t head) {
  std::printf("troupe cluster%s up in %.2f s: head + %zu node%s ALIVE\n", label.c_str(), secs, nodes,
              nodes == 1 ? "" : "s");
  std::printf("  head:       %s (pid %d)\n", info.head_address.c_str(), static_cast<int>(head));
  std::printf("  GCS:        redis %s:%d%s\n", info.redis_host.c_str(), info.redis_port,
              info.embedded_redis ? (" (embedded, data in " + s.redis_dir() + ")").c_str() : "");
  if (info.tls.enabled()) {
    std::printf("  TLS:        every connection, certificates of the cluster CA %s\n", info.tls.ca.c_str());
    std::printf("  join:       troupe tls issue --host HOST --out DIR (here), copy DIR to HOST, there: troupe up "
                "--address %s --token %s --tls-ca DIR/ca.pem --tls-cert DIR/HOST.pem --tls-key DIR/HOST.key\n",
                info.head_address.c_str(), info.token.c_str());
  } else {
    std::printf("  join:       troupe up --address %s --token %s\n", info.head_address.c_str(), info.token.c_str());
  }
  std::printf("  dashboard:  %s\n", dashboard_line(store, info.token).c_str());
  std::printf("  session:    %s  (troupe status, troupe logs, troupe down)\n", s.dir().c_str());
}

}  // namespace

int up_cluster(const UpFlags& flags, GlobalOptions&, const ClusterSpec* spec) {
  const auto start = Clock::now();
  UpFlags f = flags;
  std::optional<SlurmAllocation> slurm;
  if (f.slurm) {
    auto a = slurm_setup(&f);
    if (!a.ok()) return report_error("up", a.status());
    slurm = std::move(*a);
  }
  const auto deadline = start + std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  Session s = Session::current();
  TROUPE_RETURN_IF_ERROR_CLI(check_no_head_up(s), "up");
  stop_all(s);  // leftovers of a cluster that died without `troupe down`
  // A new cluster starts with an empty GCS: the embedded redis's data of an earlier cluster goes.
  std::error_code ec;
  std::filesystem::remove_all(s.redis_dir(), ec);
  TROUPE_RETURN_IF_ERROR_CLI(s.create(), "up");

  auto cluster = new_cluster(s, f, spec, slurm);
  if (!cluster.ok()) return report_error("up", cluster.status());
  ClusterInfo& info = *cluster;
  auto store = connect_gcs(info);
  if (!store.ok()) {
    stop_all(s);
    return report_error("up", store.status().with_context("connecting to the GCS"));
  }
  int port = f.port;
  if (port == 0) {
    auto free_port = gcs::pick_free_port();
    if (!free_port.ok()) return report_error("up", free_port.status());
    port = *free_port;
  }
  info.head_address = f.bind + ":" + std::to_string(port);
  TROUPE_RETURN_IF_ERROR_CLI(s.write_cluster(info), "up");

  const std::vector<NodeLaunch> plan = node_plan(f, spec, slurm);
  auto head = start_role(s, "head", head_args(f, spec), {});
  Status st = head.ok() ? wait_alive(**store, 1, s, deadline) : head.status();
  if (st.ok() && spec && spec->provider == "ssh") {
    st = join_over_ssh(s, *spec, plan, info, deadline);
  } else if (st.ok() && slurm) {
    st = start_slurm_nodes(s, *slurm, info, f.gpus);
  } else {
    for (size_t i = 0; st.ok() && i < plan.size(); ++i) {
      std::vector<std::string> args{"node", "--address", info.head_address, "--bind", f.bind};
      for (const auto& a : resource_args(plan[i].cpus, plan[i].gpus)) args.push_back(a);
      st = start_role(s, "node-" + std::to_string(i + 1), args, {"TROUPE_TOKEN=" + info.token}).status();
    }
  }
  if (st.ok()) st = wait_alive(**store, plan.size() + 1, s, deadline);
  if (!st.ok()) {
    stop_all(s);
    return report_error("up", st);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string label = spec ? " '" + spec->name + "'" : slurm ? " (Slurm job " + slurm->job_id + ")" : "";
  print_cluster_up(s, **store, info, label, secs, plan.size(), *head);
  return 0;
}

}  // namespace troupe::cli
