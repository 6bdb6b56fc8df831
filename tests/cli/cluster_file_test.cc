// The cluster file of `troupe up CLUSTER.yaml`: what parses into which spec and launch plan, how
// every kind of mistake is reported (code, line, field path), and the ssh command that joins a host.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/cluster_file.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using troupe::cli::ClusterSpec;
using troupe::cli::launch_plan;
using troupe::cli::load_cluster_file;
using troupe::testing::TempDir;

namespace {

// Writes `text` to <dir>/cluster.yaml and loads it.
Expected<ClusterSpec> load_text(const TempDir& dir, const std::string& text) {
  std::ofstream(dir.file("cluster.yaml")) << text;
  return load_cluster_file(dir.file("cluster.yaml"));
}

// Loading `text` fails with invalid_argument and a message holding `where` ("cluster.yaml:3: head.port:")
// and `what`.
void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  TempDir dir;
  auto spec = load_text(dir, text);
  INFO(text);
  REQUIRE_FALSE(spec.ok());
  INFO(spec.status().message());
  CHECK(spec.status().code() == Code::invalid_argument);
  CHECK(spec.status().message().find(dir.file(where)) == 0);
  CHECK(spec.status().message().find(what) != std::string::npos);
}

const char* kSsh =
    "provider: ssh\n"                         // 1
    "head: {bind: 10.0.0.1, port: 7000}\n"    // 2
    "node_types:\n"                           // 3
    "  - name: cpu\n"                         // 4
    "    cpus: 2.5\n"                         // 5
    "    hosts: [10.0.0.2, 10.0.0.3]\n"       // 6
    "  - name: gpu\n"                         // 7
    "    count: 1\n"                          // 8
    "    gpus: 4\n"                           // 9
    "    hosts: [gpu-1]\n"                    // 10
    "ssh:\n"                                  // 11
    "  user: ubuntu\n"                        // 12
    "  identity_file: /keys/id_ed25519\n"     // 13
    "  troupe: /opt/troupe/bin/troupe\n"      // 14
    "  command: [fake-ssh, -v]\n";            // 15

}  // namespace

TEST_CASE("a local cluster file parses into its spec and plan", "[cli][cluster_file]") {
  TempDir dir;
  auto spec = load_text(dir,
                        "cluster_name: demo\n"
                        "provider: local\n"
                        "head:\n"
                        "  bind: 0.0.0.0\n"
                        "  port: 6500\n"
                        "  cpus: 2\n"
                        "  gpus: 0\n"
                        "redis:\n"
                        "  address: 10.0.0.5:6379\n"
                        "  password: secret\n"
                        "node_types:\n"
                        "  - name: cpu-worker\n"
                        "    count: 3\n"
                        "    cpus: 0.5\n"
                        "  - name: default-one\n");  // count defaults to 1, resources to "all"
  REQUIRE(spec.ok());
  CHECK(spec->name == "demo");
  CHECK(spec->provider == "local");
  CHECK(spec->head.bind == "0.0.0.0");
  CHECK(spec->head.port == 6500);
  CHECK(spec->head.cpus == 2.0);
  CHECK(spec->head.gpus == 0);
  REQUIRE(spec->redis);
  CHECK(spec->redis->address == "10.0.0.5:6379");
  CHECK(spec->redis->password == "secret");
  REQUIRE(spec->node_types.size() == 2);
  CHECK(spec->node_types[0].count == 3);
  CHECK(spec->node_types[1].count == 1);
  CHECK_FALSE(spec->node_types[1].cpus);
  CHECK_FALSE(spec->node_types[1].gpus);

  auto plan = launch_plan(*spec);
  REQUIRE(plan.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CHECK(plan[i].node_type == "cpu-worker");
    CHECK_FALSE(plan[i].host);
    CHECK(plan[i].cpus == 0.5);
    CHECK_FALSE(plan[i].gpus);
  }
  CHECK(plan[3].node_type == "default-one");

  // The minimal file: defaults everywhere, a head alone.
  auto minimal = load_text(dir, "provider: local\n");
  REQUIRE(minimal.ok());
  CHECK(minimal->name == "default");
  CHECK(minimal->head.bind == "127.0.0.1");
  CHECK(minimal->head.port == 0);
  CHECK_FALSE(minimal->redis);
  CHECK(launch_plan(*minimal).empty());
}

TEST_CASE("an ssh cluster file parses into one launch per host", "[cli][cluster_file]") {
  TempDir dir;
  auto spec = load_text(dir, kSsh);
  REQUIRE(spec.ok());
  CHECK(spec->provider == "ssh");
  CHECK(spec->ssh.user == "ubuntu");
  CHECK(spec->ssh.identity_file == "/keys/id_ed25519");
  CHECK(spec->ssh.troupe == "/opt/troupe/bin/troupe");
  CHECK(spec->ssh.command == std::vector<std::string>{"fake-ssh", "-v"});
  REQUIRE(spec->node_types.size() == 2);
  CHECK(spec->node_types[0].count == 2);  // resolved from the hosts
  auto plan = launch_plan(*spec);
  REQUIRE(plan.size() == 3);
  CHECK(plan[0].host == std::optional<std::string>("10.0.0.2"));
  CHECK(plan[1].host == std::optional<std::string>("10.0.0.3"));
  CHECK(plan[1].cpus == 2.5);
  CHECK(plan[2].node_type == "gpu");
  CHECK(plan[2].host == std::optional<std::string>("gpu-1"));
  CHECK(plan[2].gpus == 4);
  CHECK_FALSE(plan[2].cpus);
}

TEST_CASE("the shipped example cluster files parse", "[cli][cluster_file]") {
  auto local = load_cluster_file(TROUPE_SOURCE_DIR "/examples/clusters/local.yaml");
  INFO(local.status().to_string());
  REQUIRE(local.ok());
  CHECK(launch_plan(*local).size() == 2);
  auto ssh = load_cluster_file(TROUPE_SOURCE_DIR "/examples/clusters/ssh.yaml");
  INFO(ssh.status().to_string());
  REQUIRE(ssh.ok());
  CHECK(launch_plan(*ssh).size() == 3);
  // The identity file's ~/ is expanded on this machine: ssh gets no shell to do it.
  if (const char* home = std::getenv("HOME"); home && *home) {
    CHECK(ssh->ssh.identity_file == std::string(home) + "/.ssh/id_ed25519");
  }
}

TEST_CASE("a missing cluster file is not_found", "[cli][cluster_file]") {
  TempDir dir;
  auto spec = load_cluster_file(dir.file("nope.yaml"));
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().code() == Code::not_found);
  CHECK(spec.status().message().find(dir.file("nope.yaml")) == 0);
}

TEST_CASE("YAML syntax errors keep yaml-cpp's line and column", "[cli][cluster_file]") {
  expect_error("provider: local\nnode_types:\n  - name: [a\n", "cluster.yaml:4:1: YAML syntax error:", "");
  expect_error("provider: local\nhead:\n  bind: 127.0.0.1: 3\n", "cluster.yaml:3:", "YAML syntax error");
  expect_error("provider: local\nhead: {bind: 127.0.0.1\n", "cluster.yaml:", "YAML syntax error");
  expect_error("provider: local\n\tport: 1\n", "cluster.yaml:2:", "YAML syntax error");
}

TEST_CASE("unknown, repeated and missing keys are refused with their line", "[cli][cluster_file]") {
  expect_error("provider: local\nnodez: 3\n", "cluster.yaml:2: unknown key 'nodez'; known: cluster_name, provider",
               "node_types");
  expect_error("provider: local\nhead:\n  bind: 127.0.0.1\n  prot: 5\n", "cluster.yaml:4: head: unknown key 'prot'",
               "known: bind, port, cpus, gpus");
  expect_error("provider: local\nnode_types:\n  - name: a\n    cpu: 2\n",
               "cluster.yaml:4: node_types[0]: unknown key 'cpu'", "");
  expect_error("provider: local\nhead:\n  port: 1\n  port: 2\n", "cluster.yaml:4: head.port: appears twice", "");
  expect_error("cluster_name: x\nhead: {port: 1}\n", "cluster.yaml:1: provider: required", "local or ssh");
  expect_error("provider: local\nnode_types:\n  - count: 2\n", "cluster.yaml:3: node_types[0].name: required", "");
  expect_error("provider: local\nredis:\n  password: x\n", "cluster.yaml:3: redis.address: required", "host:port");
  expect_error("", "cluster.yaml", "the file is empty");
  expect_error("- provider: local\n", "cluster.yaml:1: must be a mapping", "got a list");
}

TEST_CASE("wrong types and out-of-range values name the field and the value", "[cli][cluster_file]") {
  expect_error("provider: local\nnode_types:\n  - name: a\n    count: three\n",
               "cluster.yaml:4: node_types[0].count: must be an integer >= 0, got 'three'", "");
  expect_error("provider: local\nnode_types:\n  - name: a\n    count: -1\n",
               "cluster.yaml:4: node_types[0].count: must be an integer >= 0, got '-1'", "");
  expect_error("provider: local\nnode_types:\n  - name: a\n  - name: b\n    count: 2.5\n",
               "cluster.yaml:5: node_types[1].count:", "got '2.5'");
  expect_error("provider: local\nhead:\n  port: 70000\n", "cluster.yaml:3: head.port: must be an integer in 0..65535",
               "got '70000'");
  expect_error("provider: local\nhead:\n  port: [1]\n", "cluster.yaml:3: head.port:", "got a list");
  expect_error("provider: local\nhead:\n  cpus: 0\n", "cluster.yaml:3: head.cpus: must be a number > 0", "got '0'");
  expect_error("provider: local\nhead:\n  cpus: .nan\n", "cluster.yaml:3: head.cpus:", "> 0");
  expect_error("provider: local\nnode_types:\n  - name: a\n    gpus: -2\n", "cluster.yaml:4: node_types[0].gpus:",
               "got '-2'");
  expect_error("provider: kubernetes\n", "cluster.yaml:1: provider: must be local or ssh", "got 'kubernetes'");
  expect_error("cluster_name: my demo\nprovider: local\n", "cluster.yaml:1: cluster_name:", "[A-Za-z0-9_-]+");
  expect_error("provider: local\nnode_types: {name: a}\n", "cluster.yaml:2: node_types: must be a list", "");
  expect_error("provider: local\nhead:\n  bind: '-oProxyCommand=x'\n", "cluster.yaml:3: head.bind:",
               "not a host name");
  expect_error("provider: ssh\nnode_types:\n  - name: a\n    hosts: [ok, -oProxyCommand=sh]\nssh: {troupe: t}\n",
               "cluster.yaml:4: node_types[0].hosts[1]:", "not a host name");
  expect_error("provider: ssh\nnode_types: [{name: a, hosts: [h]}]\nssh: {troupe: t, user: 'a b'}\n",
               "cluster.yaml:3: ssh.user:", "not a user name");
  expect_error("provider: local\nredis:\n  address: 10.0.0.5\n", "cluster.yaml:3: redis.address: must be host:port",
               "");
}

TEST_CASE("provider rules: hosts only and always with ssh, unique names", "[cli][cluster_file]") {
  expect_error("provider: local\nnode_types:\n  - name: a\n    hosts:\n      - h1\n",
               "cluster.yaml:4: node_types[0].hosts: only for provider: ssh", "");
  expect_error("provider: local\nssh:\n  troupe: troupe\n", "cluster.yaml:2: ssh: only for provider: ssh", "");
  // ssh without hosts for one of its node types
  std::string no_hosts = kSsh;
  no_hosts.replace(no_hosts.find("    hosts: [gpu-1]\n"), 19, "");
  expect_error(no_hosts, "cluster.yaml:7: node_types[1].hosts: required with provider: ssh", "");
  expect_error("provider: ssh\nnode_types:\n  - name: a\n    hosts: []\nssh: {troupe: t}\n",
               "cluster.yaml:4: node_types[0].hosts: required", "");
  // count and hosts disagree
  std::string mismatch = kSsh;
  mismatch.replace(mismatch.find("count: 1"), 8, "count: 2");
  expect_error(mismatch, "cluster.yaml:8: node_types[1].count: 2 does not match the 1 hosts", "omit count");
  // ssh needs its section and ssh.troupe
  std::string no_ssh = kSsh;
  no_ssh.resize(no_ssh.find("ssh:\n"));
  expect_error(no_ssh, "cluster.yaml:1: ssh: required with provider: ssh", "");
  std::string no_troupe = kSsh;
  const std::string troupe_line = "  troupe: /opt/troupe/bin/troupe\n";
  no_troupe.replace(no_troupe.find(troupe_line), troupe_line.size(), "");
  expect_error(no_troupe, "cluster.yaml:12: ssh.troupe: required", "");
  // a loopback head cannot be reached from another host
  std::string loopback = kSsh;
  loopback.replace(loopback.find("10.0.0.1"), 8, "127.0.0.1");
  expect_error(loopback, "cluster.yaml:2: head.bind: 127.0.0.1 is a loopback address", "host 10.0.0.2");
  expect_error("provider: local\nnode_types:\n  - name: a\n  - name: b\n  - name: a\n",
               "cluster.yaml:5: node_types[2].name: 'a' is already the name of node_types[0]", "");
}

TEST_CASE("a loopback head is fine when every ssh host is loopback too", "[cli][cluster_file]") {
  TempDir dir;
  auto spec = load_text(dir, "provider: ssh\nnode_types:\n  - name: a\n    hosts: [127.0.0.1, localhost]\n"
                             "ssh: {troupe: ~/bin/troupe}\n");
  INFO(spec.status().to_string());
  REQUIRE(spec.ok());
  CHECK(spec->ssh.command == std::vector<std::string>{"ssh", "-o", "BatchMode=yes"});
  auto plan = launch_plan(*spec);
  REQUIRE(plan.size() == 2);
  // No user, no identity file: just the host; ~/ of the remote binary expands on the remote side.
  auto argv = cli::ssh_join_command(*spec, plan[1], "127.0.0.1:7000", "tok");
  CHECK(argv == std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "localhost",
                                         "\"$HOME\"/'bin/troupe' 'up' '--address' '127.0.0.1:7000' '--token' 'tok' "
                                         "'--bind' 'localhost'"});
}

TEST_CASE("ssh_join_command builds argv with every remote word quoted", "[cli][cluster_file]") {
  TempDir dir;
  auto spec = load_text(dir, kSsh);
  REQUIRE(spec.ok());
  auto plan = launch_plan(*spec);
  auto argv = cli::ssh_join_command(*spec, plan[0], "10.0.0.1:7000", "t0k'; rm -rf /");
  REQUIRE(argv.size() == 6);
  CHECK(argv[0] == "fake-ssh");
  CHECK(argv[1] == "-v");
  CHECK(argv[2] == "-i");
  CHECK(argv[3] == "/keys/id_ed25519");
  CHECK(argv[4] == "ubuntu@10.0.0.2");
  CHECK(argv[5] ==
        "'/opt/troupe/bin/troupe' 'up' '--address' '10.0.0.1:7000' '--token' 't0k'\\''; rm -rf /' "
        "'--cpus' '2.5' '--bind' '10.0.0.2'");
  auto gpu = cli::ssh_join_command(*spec, plan[2], "10.0.0.1:7000", "abc");
  CHECK(gpu.back() == "'/opt/troupe/bin/troupe' 'up' '--address' '10.0.0.1:7000' '--token' 'abc' '--gpus' '4' "
                      "'--bind' 'gpu-1'");
  CHECK(cli::shell_quote("it's") == "'it'\\''s'");
  CHECK(cli::shell_quote("") == "''");
}
