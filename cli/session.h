// The session directory: everything a running cluster's processes leave on this machine, in one
// place, so `troupe status`, `logs` and `down` need no flags.
//
//   $TROUPE_HOME (default ~/.troupe)/session/
//     cluster.json     how to reach the cluster: GCS (redis) address and password, head address,
//                      join token, version (mode 0600: it holds secrets)
//     pids/<role>.pid  one per process started here: redis, head, node-1, node-2, ...
//     logs/<role>.log  their stdout/stderr; the processes' own spdlog files go to logs/ as well
//     redis/           the embedded redis-server's config, append-only file and log
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tls/tls_files.h"

namespace troupe::cli {

struct ClusterInfo {
  std::string redis_host = "127.0.0.1";
  int redis_port = 0;
  std::string redis_password;
  bool embedded_redis = true;   // started by `troupe up` (and stopped by `troupe down`)
  std::string head_address;     // host:port of the head's actor system
  std::string token;            // join token nodes present to the head
  std::string version;          // troupe version of the head
  int64_t started_ms = 0;
  std::string cluster_file;     // the CLUSTER.yaml `up` started (an ssh provider's nodes: how `down`
                                // reaches one the head cannot), absolute; empty: flags
  tls::TlsFiles tls = {};            // `up --tls`: the cluster CA and this host's member certificate and key
                                // (session/tls/); empty: the cluster runs without TLS
  std::string slurm_job;        // `up --slurm`: the allocation whose steps run the nodes (how `down`
                                // stops one the head cannot); empty: not under Slurm
};

struct SessionProcess {
  std::string role;             // "redis", "head", "node-1", ...
  pid_t pid = 0;
  bool alive = false;
};

class Session {
 public:
  // The session under $TROUPE_HOME (or ~/.troupe, or /tmp/troupe-<uid> without a home).
  static Session current();
  explicit Session(std::string home);

  const std::string& home() const { return home_; }
  std::string dir() const { return home_ + "/session"; }
  std::string cluster_file() const { return dir() + "/cluster.json"; }
  std::string pid_file(const std::string& role) const { return dir() + "/pids/" + role + ".pid"; }
  std::string log_file(const std::string& role) const { return dir() + "/logs/" + role + ".log"; }
  std::string log_dir() const { return dir() + "/logs"; }
  std::string redis_dir() const { return dir() + "/redis"; }

  // Creates the directories (io_error naming the path when it cannot).
  Status create() const;
  // Writes cluster.json atomically with mode 0600.
  Status write_cluster(const ClusterInfo& info) const;
  // not_found ("no cluster is up here: <file> does not exist; start one with `troupe up`") or
  // corrupt_data naming the file and the field. A cluster with TLS also puts its files into this
  // process's environment (TROUPE_TLS_*, tls/tls_files.h), unless set already, so every connection
  // this command makes to the cluster (GCS, head, data plane) goes over TLS.
  Expected<ClusterInfo> read_cluster() const;
  // Every process with a pid file, alive or not, sorted by role.
  std::vector<SessionProcess> processes() const;
  // Removes cluster.json and the pid files (logs stay for `troupe logs`).
  Status clear() const;

 private:
  std::string home_;
};

// 32 random hex characters from the OS's random source.
std::string random_token();

}  // namespace troupe::cli
