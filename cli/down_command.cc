// `troupe down`: pauses running searches (continued with `troupe tune --resume DIR`), ends the
// cluster's unfinished jobs (CANCELLED, to be continued with `troupe submit --resume JOB`), asks the head to shut down every node — those on other hosts (joined over ssh or
// by hand) too — and waits until the head sees them gone, then stops every process this session
// started (nodes, then the head, then the embedded redis-server) and clears the session files; logs
// stay for `troupe logs`. A node the head cannot stop is stopped over ssh when the cluster file that
// started it says how (provider ssh), through Slurm (scancel of its step) when `up --slurm` started
// it, else named with its host and pid; `down` then fails (exit 1)
// after stopping everything else. Safe to run twice.
//
// Jobs are ended first so that a cluster brought up again on the same GCS does not take them over
// (a restarted head adopts unfinished jobs: that is for a head that died, not for a cluster shut
// down on purpose), and so that the nodes stopping do not make the supervisor restart them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <thread>

#include <unistd.h>

#include "cli/cluster_commands.h"
#include "cli/cluster_file.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "cli/slurm_allocation.h"
#include "core/process.h"
#include "gcs/job_table.h"
#include "gcs/search_record.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace {

// Nodes first (they would otherwise report a lost head), then the head, then redis.
int stop_order(const std::string& role) {
  if (role == "redis") return 2;
  if (role == "head") return 1;
  return 0;
}

// Pauses every RUNNING search before its trials' jobs are cancelled, so the head's search supervisor
// neither counts those trials as ended nor starts others in their place; each search's search.json
// (written here too) keeps them unfinished for `troupe tune --resume DIR`. Returns how many.
int pause_searches(const ClusterInfo& info) {
  auto store = connect_gcs(info);
  if (!store.ok()) return 0;
  auto searches = gcs::list_searches(**store);
  if (!searches.ok()) {
    std::fprintf(stderr, "troupe down: listing searches: %s\n", searches.status().to_string().c_str());
    return 0;
  }
  int paused = 0;
  for (const gcs::SearchRecord& r : *searches) {
    if (gcs::search_finished(r.state) || r.paused) continue;
    auto s = gcs::update_search(**store, r.id, [&](gcs::SearchRecord& x) -> Status {
      if (gcs::search_finished(x.state)) return invalid_argument("ended");
      x.paused = true;
      x.message = "paused: the cluster was shut down (troupe down); `troupe tune --resume " + x.dir +
                  "` on a cluster runs its unfinished trials";
      return {};
    });
    if (!s.ok()) continue;
    Status st = gcs::write_search_file(*s);
    if (!st.ok()) std::fprintf(stderr, "troupe down: search %s: %s\n", r.id.short_hex().c_str(), st.to_string().c_str());
    std::printf("search %s paused; continue it with `troupe tune --resume %s`\n", r.id.short_hex().c_str(), s->dir.c_str());
    ++paused;
  }
  return paused;
}

// Ends every unfinished job of the cluster: through the head's job supervisor when the head runs here
// (its actors are stopped, nothing restarts them), else in the GCS directly. Best effort: what fails
// is reported and `down` goes on stopping the processes.
void end_unfinished_jobs(const ClusterInfo& info, bool head_alive) {
  auto store = connect_gcs(info);
  if (!store.ok()) {
    std::fprintf(stderr, "troupe down: unfinished jobs are left as they are (GCS: %s)\n",
                 store.status().to_string().c_str());
    return;
  }
  auto jobs = gcs::Table<gcs::JobRecord>(**store).list();
  if (!jobs.ok()) {
    std::fprintf(stderr, "troupe down: listing jobs: %s\n", jobs.status().to_string().c_str());
    return;
  }
  for (const gcs::JobRecord& j : *jobs) {
    if (gcs::job_finished(j.state)) continue;
    const std::string why = "the cluster was shut down (troupe down); continue it with `troupe submit --resume " +
                            j.id.short_hex() + "`";
    Status st = head_alive ? request_job_stop(info, j.id, why, std::chrono::seconds(10)).status()
                           : gcs::update_job(**store, j.id, gcs::finish_job(gcs::JobState::cancelled, why)).status();
    if (st.ok()) std::printf("job %s cancelled; continue it with `troupe submit --resume %s`\n",
                             j.id.short_hex().c_str(), j.id.short_hex().c_str());
    else std::fprintf(stderr, "troupe down: ending job %s: %s\n", j.id.short_hex().c_str(), st.to_string().c_str());
  }
}

// Over ssh, as the cluster file says: `kill -KILL PID` on the node's host. ok when ssh ran it (exit 0).
Status kill_over_ssh(const ClusterSpec& spec, const actors::NodeShutdown& n, const Session& session) {
  const std::string host = n.address.substr(0, n.address.rfind(':'));
  SpawnOptions o;
  o.argv = ssh_command(spec, host, "kill -KILL " + std::to_string(n.pid));  // it did not answer, or did not go
  o.log_file = session.log_file("ssh-down-" + host);
  auto pid = spawn_process(o);
  if (!pid.ok()) return pid.status();
  auto code = wait_process(*pid, std::chrono::seconds(20));
  if (!code.ok()) {
    (void)stop_process(*pid, std::chrono::milliseconds(500));
    return code.status();
  }
  if (*code != 0) return unavailable("ssh " + host + " kill -KILL " + std::to_string(n.pid) + " exited " + std::to_string(*code));
  return {};
}

// `up --slurm`: SIGKILL through Slurm to every troupe node step of the allocation still running
// (those whose node exited have ended). Returns how many steps were signalled.
Expected<int> kill_slurm_node_steps(const std::string& job_id) {
  auto steps = troupe_node_steps(job_id);
  if (!steps.ok()) return steps.status();
  for (const std::string& step : *steps) {
    auto out = run_for_output({"scancel", "--signal=KILL", step}, std::chrono::seconds(20));
    if (!out.ok()) return out.status();
  }
  return static_cast<int>(steps->size());
}

// Every node of the cluster shut down through the head (local ones included: they exit by
// themselves, and the pid loop below finds them gone); those on other hosts reported one by one.
// Returns how many could not be stopped (each named on stderr).
int stop_nodes_through_head(const Session& session, const ClusterInfo& info, const std::vector<SessionProcess>& local) {
  auto reply = request_nodes_shutdown(info, "the cluster was shut down (troupe down)", std::chrono::seconds(60));
  if (!reply.ok()) {
    std::fprintf(stderr, "troupe down: the head did not stop the nodes (%s); stopping this host's processes\n",
                 reply.status().to_string().c_str());
    return 0;
  }
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  const std::string this_host = name;
  std::set<int> local_pids;
  for (const SessionProcess& p : local) local_pids.insert(static_cast<int>(p.pid));
  std::vector<actors::NodeShutdown> waiting, unstopped;  // unstopped: `error` says why
  for (const actors::NodeShutdown& n : reply->nodes) {
    if (!n.error.empty()) {
      unstopped.push_back(n);
      unstopped.back().error = "the head could not reach it: " + n.error;
    } else {
      waiting.push_back(n);
    }
  }
  // Gone once the head records them DEAD (their processes exited and their connections dropped).
  auto store = connect_gcs(info);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!waiting.empty() && store.ok()) {
    auto nodes = gcs::Table<gcs::NodeRecord>(**store).list();
    std::map<std::string, gcs::NodeState> state;
    if (nodes.ok())
      for (const gcs::NodeRecord& r : *nodes) state[r.id.hex()] = r.state;
    std::vector<actors::NodeShutdown> still;
    for (const actors::NodeShutdown& n : waiting) {
      if (state.count(n.node_id) && state[n.node_id] == gcs::NodeState::dead) {
        if (!local_pids.count(n.pid) || n.hostname != this_host)
          std::printf("stopped node %s on %s (pid %d) through the head\n", n.node_id.substr(0, 8).c_str(),
                      n.hostname.c_str(), n.pid);
      } else {
        still.push_back(n);
      }
    }
    waiting.swap(still);
    if (waiting.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (actors::NodeShutdown& n : waiting) {
    n.error = "asked to shut down, but still not gone after 10 s";
    unstopped.push_back(n);
  }
  if (unstopped.empty()) return 0;
  if (!info.slurm_job.empty()) {
    auto killed = kill_slurm_node_steps(info.slurm_job);
    if (killed.ok()) {
      for (const actors::NodeShutdown& n : unstopped)
        std::printf("stopped node %s at %s (pid %d) through Slurm: scancel --signal=KILL of job %s's troupe node "
                    "steps (%s)\n", n.node_id.substr(0, 8).c_str(), n.address.c_str(), n.pid, info.slurm_job.c_str(),
                    n.error.c_str());
      return 0;
    }
    std::fprintf(stderr, "troupe down: stopping job %s's node steps through Slurm: %s\n", info.slurm_job.c_str(),
                 killed.status().to_string().c_str());
  }
  // The cluster file that started them may say how to reach their hosts.
  std::optional<ClusterSpec> spec;
  if (!info.cluster_file.empty()) {
    auto loaded = load_cluster_file(info.cluster_file);
    if (loaded.ok() && loaded->provider == "ssh") spec = *loaded;
  }
  int failed = 0;
  for (const actors::NodeShutdown& n : unstopped) {
    const std::string id = n.node_id.substr(0, 8);
    if (spec && n.pid > 0 && !n.address.empty()) {
      Status st = kill_over_ssh(*spec, n, session);
      if (st.ok()) {
        std::printf("stopped node %s on %s (pid %d) over ssh (%s)\n", id.c_str(), n.address.c_str(), n.pid,
                    n.error.c_str());
        continue;
      }
      std::fprintf(stderr, "troupe down: node %s at %s: %s; over ssh: %s\n", id.c_str(), n.address.c_str(),
                   n.error.c_str(), st.to_string().c_str());
    } else {
      std::fprintf(stderr, "troupe down: node %s at %s (host %s, pid %d) was not stopped: %s; stop it there (kill %d)\n",
                   id.c_str(), n.address.empty() ? "?" : n.address.c_str(), n.hostname.empty() ? "?" : n.hostname.c_str(),
                   n.pid, n.error.c_str(), n.pid);
    }
    ++failed;
  }
  return failed;
}

}  // namespace

Runner add_down_command(CLI::App& app, GlobalOptions&) {
  app.add_subcommand(
      "down", "Cancel the running jobs (continue them with submit --resume) and stop every process started here");
  return []() -> int {
    Session session = Session::current();
    std::vector<SessionProcess> procs = session.processes();
    bool head_alive = false, redis_alive = false;
    for (const SessionProcess& p : procs) {
      head_alive = head_alive || (p.role == "head" && p.alive);
      redis_alive = redis_alive || (p.role == "redis" && p.alive);
    }
    auto info = session.read_cluster();
    if (info.ok() && (head_alive || redis_alive || !info->embedded_redis)) {
      // A search tick already under way when its search was paused ends within this wait.
      if (pause_searches(*info) > 0 && head_alive) std::this_thread::sleep_for(std::chrono::milliseconds(700));
      end_unfinished_jobs(*info, head_alive);
    }
    int unreached = 0;
    if (info.ok() && head_alive) unreached = stop_nodes_through_head(session, *info, procs);
    std::stable_sort(procs.begin(), procs.end(),
                     [](const auto& a, const auto& b) { return stop_order(a.role) < stop_order(b.role); });
    int stopped = 0, failed = 0;
    for (const SessionProcess& p : procs) {
      if (!p.alive) continue;
      Status st = stop_process(p.pid, std::chrono::milliseconds(3000));
      if (st.ok()) {
        ++stopped;
        std::printf("stopped %s (pid %d)\n", p.role.c_str(), static_cast<int>(p.pid));
      } else {
        ++failed;
        std::fprintf(stderr, "troupe down: %s (pid %d): %s\n", p.role.c_str(), static_cast<int>(p.pid),
                     st.to_string().c_str());
      }
    }
    if (failed) return kExitFailure;
    Status st = session.clear();
    if (unreached) {
      std::fprintf(stderr, "troupe down: %d node%s on other hosts could not be stopped (named above)\n", unreached,
                   unreached == 1 ? "" : "s");
      return kExitFailure;
    }
    if (!st.ok()) return report_error("down", st);
    if (stopped == 0) std::printf("no cluster processes were running (session %s)\n", session.dir().c_str());
    else std::printf("cluster down: %d process%s stopped; logs kept in %s\n", stopped, stopped == 1 ? "" : "es",
                     session.log_dir().c_str());
    return 0;
  };
}

}  // namespace troupe::cli
