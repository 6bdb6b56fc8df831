// The ssh provider against a real sshd (OpenSSH, key authentication, on loopback), as an operator
// uses it: `troupe up CLUSTER.yaml` joins the "remote" host over ssh (the ssh program found on PATH,
// as `command: [ssh, ...]` names it), a job trains with a worker there, and `troupe down` stops the
// remote node process at once, through the head, naming it. The remote side runs with its own
// TROUPE_HOME (sshd's SetEnv), as another user's home would be on another host.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "core/process.h"
#include "tests/cluster/cluster_fixture.h"

using namespace troupe::testing;

namespace {

// Why a real sshd cannot run here, or "".
std::string sshd_unavailable() {
  if (!std::filesystem::exists("/usr/sbin/sshd")) return "/usr/sbin/sshd is not installed (Debian package openssh-server; scripts/install-deps.sh installs it)";
  if (::geteuid() != 0) return "sshd needs root to authenticate users (privilege separation); run the suite as root";
  if (!troupe::find_program("ssh").ok()) return "no ssh client on PATH (Debian package openssh-client)";
  if (!troupe::find_program("ssh-keygen").ok()) return "no ssh-keygen on PATH (Debian package openssh-client)";
  return "";
}

// False, after a WARN saying SKIPPED and why, where a real sshd cannot run here.
bool sshd_usable() {
  const std::string why = sshd_unavailable();
  if (why.empty()) return true;
  WARN("SKIPPED: the real-sshd test cannot run: " << why);
  return false;
}

// A real sshd on loopback for `c` (key authentication; the "remote" side's TROUPE_HOME is
// <dir>/remote-home through sshd's SetEnv) and a cluster file whose ssh provider uses it.
struct LoopbackSshd {
  std::string dir, file;
  pid_t pid = -1;
};

LoopbackSshd start_sshd(ClusterFixture& c) {
  LoopbackSshd out;
  const std::string dir = c.home() + "/sshd";
  std::filesystem::create_directories(dir + "/remote-home");
  std::filesystem::create_directories("/run/sshd");  // sshd's privilege-separation directory
  auto keys = run_command("ssh-keygen -q -t ed25519 -N \"\" -f " + dir + "/host_key && ssh-keygen -q -t ed25519 -N \"\" -f " +
                          dir + "/id_ed25519 && cp " + dir + "/id_ed25519.pub " + dir + "/authorized_keys && chmod 600 " +
                          dir + "/authorized_keys", 30);
  INFO(keys.both());
  REQUIRE(keys.exit_code == 0);
  auto port = troupe::gcs::pick_free_port();
  REQUIRE(port.ok());
  std::ofstream(dir + "/sshd_config") << "Port " << *port << "\nListenAddress 127.0.0.1\nHostKey " << dir
                                      << "/host_key\nPidFile " << dir << "/sshd.pid\nAuthorizedKeysFile " << dir
                                      << "/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
                                         "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                                         "StrictModes no\nUsePAM no\nSetEnv TROUPE_HOME="
                                      << dir << "/remote-home\n";
  troupe::SpawnOptions so;
  so.argv = {"/usr/sbin/sshd", "-D", "-e", "-f", dir + "/sshd_config"};
  so.log_file = dir + "/sshd.log";
  so.detach = true;
  auto sshd = troupe::spawn_process(so);
  REQUIRE(sshd.ok());
  c.track(*sshd);
  REQUIRE(poll_until([&] { return loopback_port_accepts(*port); }, std::chrono::seconds(10)));

  // `command: [ssh, ...]`: the program by name, found on PATH.
  const std::string file = c.home() + "/ssh.yaml";
  std::ofstream(file) << "cluster_name: real-ssh\nprovider: ssh\n"
                         "head:\n  bind: 127.0.0.1\n  cpus: 1\n"
                         "node_types:\n  - name: remote\n    cpus: 2\n    hosts: [127.0.0.1]\n"
                         "ssh:\n  identity_file: "
                      << dir << "/id_ed25519\n  troupe: " << troupe_binary() << "\n  command: [ssh, -p, '" << *port
                      << "', -o, BatchMode=yes, -o, StrictHostKeyChecking=no, -o, UserKnownHostsFile=/dev/null, -o, "
                         "LogLevel=ERROR]\n";
  out.dir = dir;
  out.file = file;
  out.pid = *sshd;
  return out;
}

}  // namespace

TEST_CASE("ssh provider: a real sshd joins the remote node, a job trains there, down stops it through the head",
          "[cluster][cluster_file][ssh]") {
  if (!sshd_usable()) return;
  ClusterFixture c;
  const LoopbackSshd sshd = start_sshd(c);
  const std::string& dir = sshd.dir;
  const std::string& file = sshd.file;
  auto up = c.troupe("up " + file, 120);
  INFO(up.both() << slurp(dir + "/sshd.log") << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  Json view = c.status();
  REQUIRE(nodes_in_state(view, "ALIVE").size() == 2);
  pid_t remote_pid = 0;
  std::string remote_id;
  for (const Json& n : view.at("nodes")) {
    if (n.value("is_head", false)) continue;
    remote_pid = n.at("pid").get<pid_t>();
    remote_id = n.at("id").get<std::string>();
  }
  REQUIRE(remote_pid > 0);
  c.track(remote_pid);
  // Not one of this session's processes: it was started over ssh, into the remote home.
  for (const auto& [role, pid] : c.session_pids()) CHECK(pid != remote_pid);
  CHECK(std::filesystem::exists(dir + "/remote-home/session"));

  // A job with a worker on each node (1 cpu on the head, 2 on the remote node).
  auto job = c.troupe("submit --strategy sync --workers 3 --batch-size 96 --epochs 1 --json --no-progress", 300);
  INFO(job.both() << c.logs_tail());
  REQUIRE(job.exit_code == 0);
  CHECK(Json::parse(job.last_line()).at("workers") == 3);

  auto down = c.troupe("down", 90);
  INFO(down.both() << c.logs_tail());
  CHECK(down.exit_code == 0);
  CHECK(down.out.find("stopped node " + remote_id.substr(0, 8) + " on ") != std::string::npos);
  CHECK(down.out.find("through the head") != std::string::npos);
  // Gone when `down` returns (not 15 s later when it would have given up on the head).
  CHECK(poll_until([&] { return process_gone(remote_pid); }, std::chrono::seconds(2)));

  // A remote node that does not answer the head (frozen): `down` stops it over ssh, as the cluster
  // file says, naming it.
  auto again = c.troupe("up " + file, 120);
  INFO(again.both());
  REQUIRE(again.exit_code == 0);
  pid_t frozen = 0;
  std::string frozen_id;
  const Json second = c.status();
  INFO(second.dump(1));
  for (const Json& n : second.at("nodes")) {
    if (n.value("is_head", false) || n.at("state") == "DEAD") continue;  // (SUSPECT: a late heartbeat)
    frozen = n.at("pid").get<pid_t>();
    frozen_id = n.at("id").get<std::string>();
  }
  REQUIRE(frozen > 0);
  c.track(frozen);
  REQUIRE(::kill(frozen, SIGSTOP) == 0);
  auto down2 = c.troupe("down", 90);
  INFO(down2.both());
  CHECK(down2.exit_code == 0);
  CHECK(down2.out.find("stopped node " + frozen_id.substr(0, 8) + " at ") == std::string::npos);
  CHECK(down2.out.find("over ssh (the head could not reach it") != std::string::npos);
  CHECK(poll_until([&] { return process_gone(frozen); }, std::chrono::seconds(5)));
  ::kill(sshd.pid, SIGTERM);
}

TEST_CASE("ssh provider with --tls: each host gets its certificate through ssh, joins with it, and a job trains",
          "[cluster][cluster_file][ssh][tls]") {
  if (!sshd_usable()) return;
  ClusterFixture c;
  const LoopbackSshd sshd = start_sshd(c);
  auto up = c.troupe("up " + sshd.file + " --tls", 120);
  INFO(up.both() << slurp(sshd.dir + "/sshd.log") << c.logs_tail());
  REQUIRE(up.exit_code == 0);
  const Json view = c.status();
  REQUIRE(nodes_in_state(view, "ALIVE").size() == 2);
  for (const Json& n : view.at("nodes"))
    if (!n.value("is_head", false)) c.track(n.at("pid").get<pid_t>());
  // The remote host's files arrived through ssh into its own session; its key is private.
  const std::string remote = sshd.dir + "/remote-home/session/tls";
  REQUIRE(std::filesystem::exists(remote + "/node.key"));
  CHECK((std::filesystem::status(remote + "/node.key").permissions() & std::filesystem::perms::group_all) ==
        std::filesystem::perms::none);
  CHECK(slurp(remote + "/ca.pem") == slurp(c.session_dir() + "/tls/ca.pem"));
  CHECK(slurp(c.session_dir() + "/logs/ssh-127.0.0.1.log").find("PRIVATE KEY") == std::string::npos);
  // Workers on both nodes: their TCP mesh runs under TLS with the certificates of both hosts.
  auto job = c.troupe("submit --strategy sync --workers 3 --batch-size 96 --epochs 1 --transport tcp --json --no-progress",
                      300);
  INFO(job.both() << c.logs_tail());
  REQUIRE(job.exit_code == 0);
  CHECK(Json::parse(job.last_line()).at("workers") == 3);
  auto down = c.troupe("down", 90);
  INFO(down.both());
  CHECK(down.exit_code == 0);
  ::kill(sshd.pid, SIGTERM);
}
