// GET /metrics: the cluster in the Prometheus text exposition format (version 0.0.4), read from the
// same GCS records as /api/cluster, so one scrape target (the head's dashboard port) serves the
// whole cluster. Written here: Debian 12 has no prometheus-cpp, and the format is a few lines.
//
//   troupe_up                                   1 (the head answered and read the GCS)
//   troupe_gcs_read_seconds                     how long this scrape's GCS reads took
//   troupe_nodes{state}                         nodes by state (ALIVE, SUSPECT, DEAD)
//   troupe_node_up{node,hostname,head}          1 ALIVE, 0.5 SUSPECT, 0 DEAD, per node
//   troupe_node_cpus{node,kind}                 kind total or used; likewise _gpus, _memory_bytes
//   troupe_node_process_cpu_seconds_total{node} (counter), _resident_bytes, _open_fds, _sockets,
//   _threads, _stats_age_seconds                each live node process's own figures, which it
//                                               publishes every 5 s (gcs/node_stats.h): one scrape
//                                               target serves every host's
//   troupe_actors{state,type}                   actors by state and type
//   troupe_actor_restarts_total{type}           restarts summed over the actors of a type (counter)
//   troupe_jobs{state,strategy}                 jobs by state
//   troupe_job_info{job_id,name,strategy,state} 1, per job
//   troupe_job_step{job_id} _epoch _progress _loss _samples_per_second _test_accuracy _workers
//   troupe_job_restarts_total{job_id}           restarts of the job's actors (counter)
//   troupe_worker_step_seconds{job_id,worker,phase}  a running job's worker: its newest steps' mean
//                                               time in data_wait, compute, communication, optimizer
//   troupe_worker_allreduce_seconds{job_id,worker}   all-reduce time per step on the comm thread
//   troupe_worker_samples_per_second{job_id,worker}  and troupe_worker_last_step{job_id,worker}
//
// A troupe job is `job_id` (Prometheus keeps `job` and `instance` for the scrape itself: a target's
// own `job` label would come out renamed exported_job). Labels are node, job and actor-type names,
// never steps or times; per-node and per-job series are bounded (kMaxNodeSeries newest nodes,
// kMaxJobSeries newest jobs; the counts by state cover all). Label values are escaped as the format says (backslash, quote, newline).
#pragma once

#include <string>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::dashboard {

constexpr size_t kMaxNodeSeries = 1000;
constexpr size_t kMaxJobSeries = 200;
constexpr size_t kMaxWorkerJobs = 20;      // running jobs whose workers get series of their own
constexpr size_t kMaxWorkerSeries = 256;   // workers per job with series
constexpr size_t kWorkerSteps = 64;        // newest steps a worker's series average

// The exposition text; the GCS's error when it cannot be read.
Expected<std::string> prometheus_metrics(gcs::Store& store);

}  // namespace troupe::dashboard
