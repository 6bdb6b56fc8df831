#include "dashboard/prometheus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "gcs/events.h"
#include "gcs/job_recovery.h"
#include "gcs/node_stats.h"
#include "gcs/records.h"
#include "gcs/step_timeline.h"
#include "gcs/tables.h"

namespace troupe::dashboard {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string escaped(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// One metric family: its HELP and TYPE lines, then its samples.
class Family {
 public:
  Family(std::string* out, const std::string& name, const std::string& type, const std::string& help)
      : out_(out), name_(name) {
    *out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const Labels& labels, double value) {
    *out_ += name_;
    if (!labels.empty()) {
      *out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i)
        *out_ += (i ? "," : "") + labels[i].first + "=\"" + escaped(labels[i].second) + "\"";
      *out_ += '}';
    }
    *out_ += " " + number(value) + "\n";
  }

 private:
  std::string* out_;
  std::string name_;
};

double node_up(gcs::NodeState s) {
  return s == gcs::NodeState::alive ? 1.0 : s == gcs::NodeState::suspect ? 0.5 : 0.0;
}

// The workers of the running jobs (at most kMaxWorkerJobs of them, kMaxWorkerSeries workers each):
// where their newest steps (up to kWorkerSteps, from the step timelines the workers publish,
// gcs/step_timeline.h) spent their time, their all-reduce time, throughput and last step.
Status worker_metrics(gcs::Store& store, const std::vector<gcs::JobRecord>& jobs, std::string* out) {
  struct Worker {
    std::string job, rank;
    double data = 0, compute = 0, comm = 0, optimizer = 0, allreduce = 0, samples_per_second = 0, last_step = 0;
    double comm_bytes = 0, comm_bytes_per_second = 0;
  };
  std::vector<Worker> workers;
  size_t running = 0;
  int unreadable = 0;
  for (const gcs::JobRecord& j : jobs) {
    if (j.state != gcs::JobState::running || running++ >= kMaxWorkerJobs) continue;
    const int ranks = std::min(j.workers, static_cast<int>(kMaxWorkerSeries));
    for (int r = 0; r < ranks; ++r) {
      auto steps = gcs::read_steps(store, j.id.hex(), r, kWorkerSteps);
      if (!steps.ok()) {  // one unreadable timeline costs its worker's series, not the scrape
        ++unreadable;
        continue;
      }
      if (steps->empty()) continue;
      Worker w{j.id.hex(), std::to_string(r)};
      double samples = 0;
      for (const gcs::StepSample& s : *steps) {
        w.data += s.data_us;
        w.compute += s.compute_us;
        w.comm += s.comm_us;
        w.optimizer += s.optimizer_us;
        w.allreduce += s.comm_busy_us;
        w.comm_bytes += static_cast<double>(s.comm_bytes);
        samples += static_cast<double>(s.samples);
      }
      const double n = static_cast<double>(steps->size()) * 1e6;  // microseconds, per step, in seconds
      for (double* v : {&w.data, &w.compute, &w.comm, &w.optimizer, &w.allreduce}) *v /= n;
      const double span = static_cast<double>(steps->back().end_us() - steps->front().start_us) / 1e6;
      w.samples_per_second = span > 0 ? samples / span : 0;
      w.comm_bytes_per_second = span > 0 ? w.comm_bytes / span : 0;
      w.comm_bytes /= static_cast<double>(steps->size());
      w.last_step = static_cast<double>(steps->back().step);
      workers.push_back(std::move(w));
    }
  }
  Family split(out, "troupe_worker_step_seconds", "gauge",
               "A worker's mean step time over its newest steps by phase: data_wait, compute (forward and "
               "backward), communication (waiting for the gradients' all-reduce, or a pull), optimizer");
  for (const Worker& w : workers) {
    split.sample({{"job_id", w.job}, {"worker", w.rank}, {"phase", "data_wait"}}, w.data);
    split.sample({{"job_id", w.job}, {"worker", w.rank}, {"phase", "compute"}}, w.compute);
    split.sample({{"job_id", w.job}, {"worker", w.rank}, {"phase", "communication"}}, w.comm);
    split.sample({{"job_id", w.job}, {"worker", w.rank}, {"phase", "optimizer"}}, w.optimizer);
  }
  Family allreduce(out, "troupe_worker_allreduce_seconds", "gauge",
                   "A sync worker's all-reduce time per step on its communication thread, overlapping backward "
                   "included (its newest steps' mean)");
  for (const Worker& w : workers) allreduce.sample({{"job_id", w.job}, {"worker", w.rank}}, w.allreduce);
  Family bytes(out, "troupe_worker_allreduce_bytes_per_step", "gauge",
               "Bytes a sync worker's collectives carried per step: its gradients at their wire type (bf16: "
               "half), plus the parameter gathers of sharded jobs (its newest steps' mean)");
  for (const Worker& w : workers) bytes.sample({{"job_id", w.job}, {"worker", w.rank}}, w.comm_bytes);
  Family byte_rate(out, "troupe_worker_allreduce_bytes_per_second", "gauge",
                   "Bytes a sync worker's collectives carried per second over its newest steps");
  for (const Worker& w : workers) byte_rate.sample({{"job_id", w.job}, {"worker", w.rank}}, w.comm_bytes_per_second);
  Family rate(out, "troupe_worker_samples_per_second", "gauge", "A worker's examples per second over its newest steps");
  for (const Worker& w : workers) rate.sample({{"job_id", w.job}, {"worker", w.rank}}, w.samples_per_second);
  Family last(out, "troupe_worker_last_step", "gauge", "The newest step a worker published (a stuck worker stops here)");
  for (const Worker& w : workers) last.sample({{"job_id", w.job}, {"worker", w.rank}}, w.last_step);
  Family(out, "troupe_worker_timelines_unreadable", "gauge",
         "Workers' step timelines this scrape could not read (their series are left out)")
      .sample({}, unreadable);
  return {};
}

// The last restart of every job that had one (gcs/job_recovery.h): how long the failure took to
// be acted on, and until the job trained again (sync: its first step after the restart).
void recovery_metrics(gcs::Store& store, std::string* out) {
  std::vector<std::pair<std::string, gcs::JobRecovery>> last;
  if (auto rows = store.get_all(gcs::kJobRecoveryTable); rows.ok()) {
    for (const auto& [key, bytes] : *rows) {
      auto id = JobId::from_hex(key);
      if (!id.ok()) continue;
      auto r = gcs::decode_job_recovery(bytes, *id);
      if (r.ok() && r->restarts > 0) last.emplace_back(key, *r);  // (0: a worker's note before any restart)
    }
  }
  Family detect(out, "troupe_job_failure_detection_seconds", "gauge",
                "A job's last failure: from when it failed (a lost node's last heartbeat, else when the failure "
                "arrived) to the supervisor's restart");
  for (const auto& [job, r] : last)
    detect.sample({{"job_id", job}}, static_cast<double>(std::max<int64_t>(0, r.detected_ms - r.failed_ms)) / 1000.0);
  Family resume(out, "troupe_job_resume_seconds", "gauge",
                "A job's last restart: from the supervisor's decision to the restarted attempt's first step (sync "
                "jobs; absent until it trained again)");
  for (const auto& [job, r] : last)
    if (r.resumed_ms > 0)
      resume.sample({{"job_id", job}}, static_cast<double>(std::max<int64_t>(0, r.resumed_ms - r.detected_ms)) / 1000.0);
  Family lost(out, "troupe_job_recovery_steps_lost", "gauge",
              "A job's last restart: completed steps it trained again (live recovery: 0; from a checkpoint: the "
              "steps since it), by how it went on");
  for (const auto& [job, r] : last)
    if (r.steps_lost() >= 0) lost.sample({{"job_id", job}, {"mode", r.mode}}, static_cast<double>(r.steps_lost()));
  Family moved(out, "troupe_job_recovery_bytes_moved", "gauge",
               "A job's last live recovery: the bytes of state a survivor sent to the replacements");
  for (const auto& [job, r] : last)
    if (r.mode == "live") moved.sample({{"job_id", job}}, static_cast<double>(r.bytes_moved));
}

// Nodes: counts by state over all; per-node series for the newest kMaxNodeSeries, to which *nodes
// is cut (newest first).
void node_metrics(std::vector<gcs::NodeRecord>* nodes, std::string* out) {
  std::map<std::string, int> node_states{{"ALIVE", 0}, {"SUSPECT", 0}, {"DEAD", 0}};
  for (const gcs::NodeRecord& n : *nodes) ++node_states[gcs::node_state_name(n.state)];
  Family by_state(out, "troupe_nodes", "gauge", "Nodes by state");
  for (const auto& [state, count] : node_states) by_state.sample({{"state", state}}, count);
  std::sort(nodes->begin(), nodes->end(),
            [](const gcs::NodeRecord& a, const gcs::NodeRecord& b) { return a.started_ms > b.started_ms; });
  if (nodes->size() > kMaxNodeSeries) nodes->resize(kMaxNodeSeries);
  Family up(out, "troupe_node_up", "gauge", "1 ALIVE, 0.5 SUSPECT, 0 DEAD");
  for (const gcs::NodeRecord& n : *nodes)
    up.sample({{"node", n.id.hex()}, {"hostname", n.hostname}, {"head", n.is_head ? "1" : "0"}}, node_up(n.state));
  struct PerNode {
    const char* name;
    const char* help;
    double (*total)(const gcs::NodeRecord&);
    double (*used)(const gcs::NodeRecord&);
  };
  const PerNode per_node[] = {
      {"troupe_node_cpus", "A node's cpus: total, and used by its actors",
       [](const gcs::NodeRecord& n) { return n.total.cpus; }, [](const gcs::NodeRecord& n) { return n.used.cpus; }},
      {"troupe_node_gpus", "A node's gpus: total, and used by its actors",
       [](const gcs::NodeRecord& n) { return n.total.gpus; }, [](const gcs::NodeRecord& n) { return n.used.gpus; }},
      {"troupe_node_memory_bytes", "A node's memory: total, and reserved by its actors",
       [](const gcs::NodeRecord& n) { return static_cast<double>(n.total.memory_bytes); },
       [](const gcs::NodeRecord& n) { return static_cast<double>(n.used.memory_bytes); }},
  };
  for (const PerNode& p : per_node) {  // each family's samples together, as the format requires
    Family f(out, p.name, "gauge", p.help);
    for (const gcs::NodeRecord& n : *nodes) {
      f.sample({{"node", n.id.hex()}, {"kind", "total"}}, p.total(n));
      f.sample({{"node", n.id.hex()}, {"kind", "used"}}, p.used(n));
    }
  }
}

// Each live node process's own figures, as it last published them (gcs/node_stats.h).
Status node_process_metrics(gcs::Store& store, const std::vector<gcs::NodeRecord>& nodes, std::string* out) {
  int unreadable_stats = 0;
  auto stats = gcs::list_node_stats(store, &unreadable_stats);
  if (!stats.ok()) return stats.status();
  std::map<std::string, gcs::NodeProcessStats> stats_of;
  for (gcs::NodeProcessStats& s : *stats) stats_of[s.node] = std::move(s);
  struct PerProcess {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const gcs::NodeProcessStats&);
  };
  const int64_t now = gcs::now_ms();
  const PerProcess per_process[] = {
      {"troupe_node_process_cpu_seconds_total", "counter", "A node process's user and system CPU time",
       [](const gcs::NodeProcessStats& s) { return s.cpu_seconds; }},
      {"troupe_node_process_resident_bytes", "gauge", "A node process's resident memory",
       [](const gcs::NodeProcessStats& s) { return static_cast<double>(s.rss_bytes); }},
      {"troupe_node_process_open_fds", "gauge", "A node process's open file descriptors (sockets included)",
       [](const gcs::NodeProcessStats& s) { return static_cast<double>(s.open_fds); }},
      {"troupe_node_process_sockets", "gauge", "A node process's open sockets",
       [](const gcs::NodeProcessStats& s) { return static_cast<double>(s.sockets); }},
      {"troupe_node_process_threads", "gauge", "A node process's threads",
       [](const gcs::NodeProcessStats& s) { return static_cast<double>(s.threads); }},
  };
  for (const PerProcess& p : per_process) {
    Family f(out, p.name, p.type, p.help);
    for (const gcs::NodeRecord& n : nodes) {
      auto it = stats_of.find(n.id.hex());
      if (n.state != gcs::NodeState::dead && it != stats_of.end()) f.sample({{"node", n.id.hex()}}, p.value(it->second));
    }
  }
  Family age(out, "troupe_node_process_stats_age_seconds", "gauge",
             "How old a live node process's published figures are (they come every 5 s)");
  for (const gcs::NodeRecord& n : nodes) {
    auto it = stats_of.find(n.id.hex());
    if (n.state != gcs::NodeState::dead && it != stats_of.end())
      age.sample({{"node", n.id.hex()}}, static_cast<double>(now - it->second.time_ms) / 1000.0);
  }
  Family(out, "troupe_node_process_stats_unreadable", "gauge", "Node figures in the GCS that do not decode")
      .sample({}, unreadable_stats);
  return {};
}

// Actors: by state and type, and restarts by type (types are few: troupe.worker, troupe.ps, ...).
// Returns the restarts by job, for the jobs' series.
std::map<std::string, int64_t> actor_metrics(const std::vector<gcs::ActorRecord>& actors, std::string* out) {
  std::map<std::pair<std::string, std::string>, int> actor_counts;
  std::map<std::string, int64_t> restarts_by_type;
  std::map<std::string, int64_t> restarts_by_job;
  for (const gcs::ActorRecord& a : actors) {
    ++actor_counts[{gcs::actor_state_name(a.state), a.type_name}];
    restarts_by_type[a.type_name] += a.restarts;
    if (!a.job.nil()) restarts_by_job[a.job.hex()] += a.restarts;
  }
  Family actor_family(out, "troupe_actors", "gauge", "Actors by state and type");
  for (const auto& [key, count] : actor_counts) actor_family.sample({{"state", key.first}, {"type", key.second}}, count);
  Family actor_restarts(out, "troupe_actor_restarts_total", "counter", "Restarts of the actors of a type");
  for (const auto& [type, count] : restarts_by_type) actor_restarts.sample({{"type", type}}, static_cast<double>(count));
  return restarts_by_job;
}

// Jobs: counts by state and strategy over all; per-job series for the newest kMaxJobSeries, to
// which *jobs is cut (newest first).
void job_metrics(std::vector<gcs::JobRecord>* jobs, const std::map<std::string, int64_t>& restarts_by_job,
                 std::string* out) {
  std::map<std::pair<std::string, std::string>, int> job_counts;
  for (const gcs::JobRecord& j : *jobs) ++job_counts[{gcs::job_state_name(j.state), j.strategy}];
  Family job_family(out, "troupe_jobs", "gauge", "Jobs by state and strategy");
  for (const auto& [key, count] : job_counts) job_family.sample({{"state", key.first}, {"strategy", key.second}}, count);
  std::sort(jobs->begin(), jobs->end(),
            [](const gcs::JobRecord& a, const gcs::JobRecord& b) { return a.submitted_ms > b.submitted_ms; });
  if (jobs->size() > kMaxJobSeries) jobs->resize(kMaxJobSeries);
  Family info(out, "troupe_job_info", "gauge", "1 per job, its name, strategy and state as labels");
  for (const gcs::JobRecord& j : *jobs)
    info.sample({{"job_id", j.id.hex()}, {"name", j.name}, {"strategy", j.strategy},
                 {"state", gcs::job_state_name(j.state)}}, 1);
  struct PerJob {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const gcs::JobRecord&);
  };
  const PerJob per_job[] = {
      {"troupe_job_step", "gauge", "Steps the job trained (its rank 0's count)",
       [](const gcs::JobRecord& j) { return static_cast<double>(j.step); }},
      {"troupe_job_epoch", "gauge", "The epoch the job trains", [](const gcs::JobRecord& j) { return double(j.epoch); }},
      {"troupe_job_progress", "gauge", "The job's progress, 0 to 1", [](const gcs::JobRecord& j) { return j.progress; }},
      {"troupe_job_loss", "gauge", "The running mean training loss of the current epoch",
       [](const gcs::JobRecord& j) { return j.loss; }},
      {"troupe_job_samples_per_second", "gauge", "Training examples per second, the whole job",
       [](const gcs::JobRecord& j) { return j.samples_per_second; }},
      {"troupe_job_test_accuracy", "gauge", "Test accuracy after the last evaluated epoch (-1: none yet)",
       [](const gcs::JobRecord& j) { return j.test_accuracy; }},
      {"troupe_job_workers", "gauge", "The job's workers", [](const gcs::JobRecord& j) { return double(j.workers); }},
  };
  for (const PerJob& p : per_job) {
    Family f(out, p.name, p.type, p.help);
    for (const gcs::JobRecord& j : *jobs) f.sample({{"job_id", j.id.hex()}}, p.value(j));
  }
  Family job_restarts(out, "troupe_job_restarts_total", "counter", "Restarts of the job's actors");
  for (const gcs::JobRecord& j : *jobs) {
    auto it = restarts_by_job.find(j.id.hex());
    job_restarts.sample({{"job_id", j.id.hex()}}, it == restarts_by_job.end() ? 0.0 : static_cast<double>(it->second));
  }
}

}  // namespace

Expected<std::string> prometheus_metrics(gcs::Store& store) {
  const auto began = std::chrono::steady_clock::now();
  auto nodes = gcs::Table<gcs::NodeRecord>(store).list();
  if (!nodes.ok()) return nodes.status();
  auto actors = gcs::Table<gcs::ActorRecord>(store).list();
  if (!actors.ok()) return actors.status();
  auto jobs = gcs::Table<gcs::JobRecord>(store).list();
  if (!jobs.ok()) return jobs.status();
  const double read_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();

  std::string out;
  Family(&out, "troupe_up", "gauge", "1: the head answered this scrape and read the GCS").sample({}, 1);
  Family(&out, "troupe_gcs_read_seconds", "gauge", "Seconds this scrape's reads of the GCS took")
      .sample({}, read_seconds);
  node_metrics(&*nodes, &out);
  TROUPE_RETURN_IF_ERROR(node_process_metrics(store, *nodes, &out));
  const std::map<std::string, int64_t> restarts_by_job = actor_metrics(*actors, &out);
  job_metrics(&*jobs, restarts_by_job, &out);
  recovery_metrics(store, &out);
  TROUPE_RETURN_IF_ERROR(worker_metrics(store, *jobs, &out));
  return out;
}

}  // namespace troupe::dashboard
