// The cluster file of `troupe up CLUSTER.yaml`: one YAML document that says where the head runs and
// which nodes to start, on this machine (provider local) or on other hosts over ssh (provider ssh).
//
//   cluster_name: demo            # optional, [A-Za-z0-9_-]+ (default "default")
//   provider: local               # required: local (node processes on this machine)
//                                 #         | ssh (runs `troupe up --address ...` on each listed host)
//   head:                         # optional
//     bind: 127.0.0.1             # address the head (and the embedded redis) listen on (default)
//     port: 0                     # head port, 0..65535; 0 picks a free one (default)
//     cpus: 2                     # optional: resources the head offers as a node (> 0)
//     gpus: 0                     # optional (>= 0)
//   redis:                        # optional: an existing redis-server instead of the embedded one
//     address: 10.0.0.5:6379      # required in this section, host:port
//     password: secret            # optional
//   node_types:                   # optional: no entry means a head alone
//     - name: cpu-worker          # required, [A-Za-z0-9_-]+, unique
//       count: 3                  # local: node processes of this type (>= 0, default 1)
//                                 # ssh: must equal the number of hosts, or be omitted
//       cpus: 2                   # optional (> 0); absent: all of the machine's
//       gpus: 0                   # optional (>= 0); absent: all visible
//       hosts: [10.0.0.2, 10.0.0.3]  # ssh: required, one node per host; local: refused
//   ssh:                          # provider ssh only
//     user: ubuntu                # optional: ssh's default user
//     identity_file: ~/.ssh/id_ed25519  # optional; a leading ~/ is expanded to $HOME here
//     troupe: /usr/local/bin/troupe     # required: the troupe binary on the remote hosts
//     command: [ssh, -o, BatchMode=yes] # optional (this is the default); tests put a fake here
//
// Every mistake is reported with the file, the 1-based line and the path of the field:
//   "cluster.yaml:7: node_types[0].count: must be an integer >= 0, got 'three'"
// Unknown and duplicate keys are errors, so a misspelt key never silently means its default.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::cli {

struct HeadSpec {
  std::string bind = "127.0.0.1";
  int port = 0;
  std::optional<double> cpus;
  std::optional<int> gpus;
};

struct RedisSpec {
  std::string address;   // host:port
  std::string password;  // empty: none
};

struct NodeType {
  std::string name;
  int count = 0;                   // resolved: local the given count (default 1), ssh hosts.size()
  std::optional<double> cpus;
  std::optional<int> gpus;
  std::vector<std::string> hosts;  // ssh provider only
};

struct SshSpec {
  std::string user;                // empty: ssh's default (the local user or ~/.ssh/config)
  std::string identity_file;       // empty: ssh's default keys; ~/ already expanded
  std::string troupe;              // path of the troupe binary on the remote hosts
  std::vector<std::string> command{"ssh", "-o", "BatchMode=yes"};
};

struct ClusterSpec {
  std::string name = "default";
  std::string provider;            // "local" or "ssh"
  HeadSpec head;
  std::optional<RedisSpec> redis;
  std::vector<NodeType> node_types;
  SshSpec ssh;
};

// Reads and checks the cluster file at `path`. not_found when the file does not exist, io_error when
// it cannot be read, invalid_argument for everything else (YAML syntax, unknown or duplicate keys,
// wrong types, values out of range, missing required fields, provider rules), the message starting
// "<path>:<line>: <field path>: ". Nothing is started or contacted.
Expected<ClusterSpec> load_cluster_file(const std::string& path);

// One node to start.
struct NodeLaunch {
  std::string node_type;
  std::optional<std::string> host;  // ssh provider: the host to run it on; local: none
  std::optional<double> cpus;
  std::optional<int> gpus;
};

// One entry per node to start, in file order: node types in order, then their count (local) or hosts
// (ssh) in order. The head is not in it.
std::vector<NodeLaunch> launch_plan(const ClusterSpec& spec);

// The argv that runs `remote` (one shell command line) on `host` as the cluster file's ssh section
// says: <ssh.command...> [-i IDENTITY] [USER@]HOST REMOTE.
std::vector<std::string> ssh_command(const ClusterSpec& spec, const std::string& host, const std::string& remote);

// The argv that joins `node` (which must have a host) to the head at `head_address` over ssh:
//   <ssh.command...> [-i IDENTITY] [USER@]HOST '<troupe>' 'up' '--address' 'HEAD' '--token' 'T'
//                    ['--cpus' 'X'] ['--gpus' 'N'] '--bind' 'HOST'
// The remote command is one argument, every word single-quoted (ssh hands it to the remote shell),
// so no value can inject shell syntax there. Run it with spawn_process, not through a shell.
// `extra`: more words for the remote `troupe up` (quoted like the rest).
std::vector<std::string> ssh_join_command(const ClusterSpec& spec, const NodeLaunch& node,
                                          const std::string& head_address, const std::string& token,
                                          const std::vector<std::string>& extra = {});

// `word` quoted for a POSIX shell: 'it'\''s' for it's.
std::string shell_quote(const std::string& word);

}  // namespace troupe::cli
