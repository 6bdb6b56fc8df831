// `troupe up --tls` across two hosts (network namespaces joined by a veth pair), as an operator runs
// it: the head's host makes the cluster CA, issues the other host a certificate (`troupe tls issue`),
// that host joins with it, and an async job trains with its parameter server on one host and its
// worker on the other. tcpdump on the link records everything that crosses it: neither the join
// token, nor the Redis password, nor a known run of the model's parameters appears in it — and the
// same job with `--data-plane plain` shows the parameters, so the search would find them. A host with
// a self-signed certificate, and one with the token alone, cannot join, and each is told why.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/process.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/jobs/job_fault_helpers.h"
#include "tests/support/netns_pair.h"

using namespace troupe::testing;

namespace {

constexpr float kPattern = 0.1234567f;  // the first 256 parameters of the model every job starts from

// Bytes of 16 consecutive pattern floats, as they travel (little-endian f32).
std::string pattern_bytes() {
  std::string one(sizeof(float), '\0');
  std::memcpy(one.data(), &kPattern, sizeof kPattern);
  std::string out;
  for (int i = 0; i < 16; ++i) out += one;
  return out;
}

// A capture of everything crossing host B's end of the link while it runs.
class Capture {
 public:
  Capture(const NetnsPair& net, const std::string& file) : file_(file) {
    troupe::SpawnOptions o;
    o.argv = {"ip", "netns", "exec", net.ns_b(), "tcpdump", "-i", net.dev_b(), "-s", "0", "-U", "-w", file};
    o.log_file = file + ".log";
    auto pid = troupe::spawn_process(o);
    if (pid.ok()) pid_ = *pid;
    ready_ = poll_until([&] { return slurp(file + ".log").find("listening on") != std::string::npos; },
                        std::chrono::seconds(10));
  }
  ~Capture() { stop(); }
  bool ready() const { return ready_; }
  // Stops tcpdump and returns the capture's bytes.
  std::string stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGINT);
      (void)troupe::wait_process(pid_, std::chrono::seconds(10));
      pid_ = -1;
    }
    return slurp(file_);
  }

 private:
  std::string file_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

// A model whose first tensor starts with 256 pattern floats: saved by a short `troupe train`, then
// rewritten in place (the safetensors data follows an 8-byte length and the JSON header).
std::string pattern_model(ClusterFixture& c) {
  const std::string model = c.home() + "/pattern.safetensors";
  auto trained = c.troupe("train --epochs 1 --max-steps 5 --no-progress --save " + model, 120);
  INFO(trained.both());
  REQUIRE(trained.exit_code == 0);
  std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header = 0;
  f.read(reinterpret_cast<char*>(&header), sizeof header);
  f.seekp(static_cast<std::streamoff>(sizeof header + header));
  for (int i = 0; i < 256; ++i) f.write(reinterpret_cast<const char*>(&kPattern), sizeof kPattern);
  REQUIRE(f.good());
  return model;
}

}  // namespace

TEST_CASE("tls: a cluster across two hosts trains with nothing readable on the link, and strangers are refused",
          "[jobs][cluster][tls]") {
  if (::geteuid() != 0) {
    WARN("SKIPPED: the TLS test needs root to create network namespaces and capture on their link");
    return;
  }
  if (!troupe::find_program("tcpdump").ok()) {
    WARN("SKIPPED: tcpdump is not installed (Debian package tcpdump; scripts/install-deps.sh installs it)");
    return;
  }
  NetnsPair net("10.231.9.1", "10.231.9.2", "t" + std::to_string(::getpid() % 100000));
  if (!net.ok()) {
    WARN("SKIPPED: cannot create network namespaces here: " << net.error());
    return;
  }
  REQUIRE(poll_until([&] { return net.link_up(); }, std::chrono::seconds(10)));
  ClusterFixture a(net.exec_in_a()), b(net.exec_in_b());
  a.up("--tls --bind " + net.host_a() + " --cpus 2");
  const Json info = a.cluster_file();
  const std::string head = info.at("head_address").get<std::string>();
  const std::string token = info.at("token").get<std::string>();
  const std::string password = info.at("redis_password").get<std::string>();
  const std::string certs = a.home() + "/for-b";
  auto issued = a.troupe("tls issue --host " + net.host_b() + " --name b --out " + certs, 30);
  INFO(issued.both());
  REQUIRE(issued.exit_code == 0);
  const std::string join = "up --address " + head + " --token " + token + " --bind " + net.host_b() +
                           " --cpus 2 --timeout 20";

  SECTION("a host with a self-signed certificate cannot join, and is told why") {
    const std::string rogue = b.home() + "/rogue";
    std::filesystem::create_directories(rogue);
    auto made = run_command("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=rogue"
                            " -keyout " + rogue + "/key.pem -out " + rogue + "/cert.pem 2>&1", 30);
    REQUIRE(made.exit_code == 0);
    auto r = b.troupe(join + " --tls-ca " + rogue + "/cert.pem --tls-cert " + rogue + "/cert.pem --tls-key " + rogue +
                          "/key.pem",
                      60);
    INFO(r.both() << b.logs_tail());
    CHECK(r.exit_code != 0);
    CHECK(r.both().find("TLS handshake with " + head) != std::string::npos);
    CHECK(r.both().find("certificate") != std::string::npos);
    // Its certificate is not the CA's: even with the cluster's CA file it is refused here, before it dials.
    auto mixed = b.troupe(join + " --tls-ca " + certs + "/ca.pem --tls-cert " + rogue + "/cert.pem --tls-key " + rogue +
                              "/key.pem",
                          60);
    INFO(mixed.both());
    CHECK(mixed.exit_code != 0);
    CHECK(mixed.both().find("is not valid for the cluster CA") != std::string::npos);
    // The join token alone is not enough either.
    auto plain = b.troupe(join, 60);
    INFO(plain.both() << b.logs_tail());
    CHECK(plain.exit_code != 0);
    CHECK(plain.both().find("TLS") != std::string::npos);
  }

  SECTION("a job across both hosts: the link carries neither the token, the password nor the parameters") {
    auto joined = b.troupe(join + " --tls-ca " + certs + "/ca.pem --tls-cert " + certs + "/b.pem --tls-key " + certs +
                               "/b.key",
                           60);
    INFO(joined.both() << a.logs_tail() << b.logs_tail());
    REQUIRE(joined.exit_code == 0);
    const std::string model = pattern_model(a);
    // A worker and a server of 2 CPUs each on two 2-CPU hosts: one on each, so the parameters cross
    // the link; the worker's first pull, before any push, carries the pattern as it is in the file.
    const std::string job = "submit --strategy async --workers 1 --ps 1 --cpus-per-worker 2 --cpus-per-ps 2 --epochs 1 "
                            "--no-progress --json --init-from " + model;
    for (const std::string plane : {"auto", "plain"}) {
      Capture capture(net, a.home() + "/link-" + plane + ".pcap");
      REQUIRE(capture.ready());
      auto r = a.troupe(job + " --data-plane " + plane, 300);
      const std::string bytes = capture.stop();
      INFO(plane << ": " << r.both() << a.logs_tail());
      REQUIRE(r.exit_code == 0);
      CHECK(Json::parse(r.last_line()).at("test_accuracy").get<double>() > 0.1);  // it trained to the end
      REQUIRE(bytes.size() > 100000);  // the job's traffic was captured
      CHECK(bytes.find(token) == std::string::npos);
      CHECK(bytes.find(password) == std::string::npos);
      if (plane == "auto") CHECK(bytes.find(pattern_bytes()) == std::string::npos);
      else CHECK(bytes.find(pattern_bytes()) != std::string::npos);  // the check would see them
    }
    // The dashboard is HTTPS and wants a certificate of the cluster.
    const std::string tls_dir = a.session_dir() + "/tls";
    auto url = a.troupe("status --json", 30);
    std::string dash = Json::parse(url.out).at("cluster").at("dashboard").get<std::string>();
    dash = dash.substr(0, dash.find(' '));
    CHECK(dash.rfind("https://", 0) == 0);
    auto with = run_command(net.exec_in_b() + " curl -s -o /dev/null -w %{http_code} --cacert " + tls_dir + "/ca.pem --cert " +
                            certs + "/b.pem --key " + certs + "/b.key " + dash + "/api/nodes?token=" + token, 30);
    CHECK(with.out == "200");
    auto without = run_command(net.exec_in_b() + " curl -s -o /dev/null -w %{http_code} --cacert " + tls_dir + "/ca.pem " +
                               dash + "/api/nodes?token=" + token, 30);
    CHECK(without.out != "200");
  }
}
