// Two namespaces and a veth pair by `ip` commands, and iperf3 between them (cli/bench_netns.h).
#include "cli/bench_netns.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_launch.h"
#include "core/process.h"

namespace troupe::cli {
namespace {

struct Output {
  int exit_code = -1;
  std::string text;  // stdout and stderr together
};

// Runs argv (argv[0] a path) to completion or `limit` (then stops it: exit_code -1), its output
// captured through the file `log`.
Output run(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds limit) {
  Output out;
  std::remove(log.c_str());
  auto p = launch(argv[0], argv, log);
  if (!p.ok()) {
    out.text = p.status().message();
    return out;
  }
  auto code = wait_process(p->pid, std::chrono::duration_cast<std::chrono::milliseconds>(limit));
  if (!code.ok()) (void)stop_process(p->pid, std::chrono::milliseconds(500));
  out.exit_code = code.ok() ? *code : -1;
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  out.text = s.str();
  return out;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string find_ip() {
  std::string ip = find_in_path("ip");
  for (const char* dir : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"})
    if (ip.empty() && ::access(dir, X_OK) == 0) ip = dir;
  return ip;
}

}  // namespace

Expected<std::unique_ptr<NetnsHosts>> NetnsHosts::create() {
  if (::geteuid() != 0) {
    return invalid_argument(
        "--netns creates network namespaces with `ip netns`, which needs root: run as root or drop --netns");
  }
  std::unique_ptr<NetnsHosts> h(new NetnsHosts());
  h->ip_ = find_ip();
  if (h->ip_.empty()) return invalid_argument("--netns needs iproute2 (`ip`), which is not installed");
  const int id = static_cast<int>(::getpid() % 100000);
  const std::string subnet = "10.233." + std::to_string(id % 250) + ".";
  for (int k = 0; k < 2; ++k) {
    h->ns_[k] = std::string("troupe-bench") + (k ? "B-" : "A-") + std::to_string(id);
    h->veth_[k] = std::string(k ? "tbvb" : "tbva") + std::to_string(id);  // <= 15 characters
    h->address_[k] = subnet + std::to_string(k + 1);
  }
  const std::string& ip = h->ip_;
  const std::vector<std::vector<std::string>> steps = {
      {ip, "netns", "add", h->ns_[0]},
      {ip, "netns", "add", h->ns_[1]},
      {ip, "link", "add", h->veth_[0], "netns", h->ns_[0], "type", "veth", "peer", "name", h->veth_[1], "netns",
       h->ns_[1]},
      {ip, "-n", h->ns_[0], "addr", "add", h->address_[0] + "/24", "dev", h->veth_[0]},
      {ip, "-n", h->ns_[1], "addr", "add", h->address_[1] + "/24", "dev", h->veth_[1]},
      {ip, "-n", h->ns_[0], "link", "set", "lo", "up"},
      {ip, "-n", h->ns_[1], "link", "set", "lo", "up"},
      {ip, "-n", h->ns_[0], "link", "set", h->veth_[0], "up"},
      {ip, "-n", h->ns_[1], "link", "set", h->veth_[1], "up"},
  };
  const std::string log = "/tmp/troupe-bench-netns-" + std::to_string(id) + ".log";
  for (size_t i = 0; i < steps.size(); ++i) {
    Output out = run(steps[i], log, std::chrono::seconds(20));
    if (i < 2 && out.exit_code == 0) h->created_[i] = true;
    if (out.exit_code != 0) {
      std::remove(log.c_str());
      return io_error("--netns: `" + joined(steps[i]) + "` failed (exit " + std::to_string(out.exit_code) +
                      "): " + out.text);
    }
  }
  // Both ends up (carrier on) before anything connects.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int k = 0; k < 2; ++k) {
    while (true) {
      Output out = run({ip, "-n", h->ns_[k], "link", "show", h->veth_[k]}, log, std::chrono::seconds(10));
      if (out.text.find("state UP") != std::string::npos) break;
      if (std::chrono::steady_clock::now() >= until) {
        std::remove(log.c_str());
        return Status(Code::timeout, "--netns: " + h->veth_[k] + " in " + h->ns_[k] + " did not come up: " + out.text);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::remove(log.c_str());
  return h;
}

NetnsHosts::~NetnsHosts() {
  // Deleting a namespace deletes its end of the veth pair, and with it the other end.
  const std::string log = "/tmp/troupe-bench-netns-" + std::to_string(::getpid()) + "-del.log";
  for (int k = 0; k < 2; ++k)
    if (created_[k]) (void)run({ip_, "netns", "del", ns_[k]}, log, std::chrono::seconds(20));
  std::remove(log.c_str());
}

std::vector<std::string> NetnsHosts::exec_prefix(int host) const { return {ip_, "netns", "exec", ns_[host]}; }

namespace {

// One iperf3 run from A to B: the receiver's rate in each direction it ran, in Gbit/s.
Expected<std::pair<double, double>> run_iperf3(const NetnsHosts& hosts, const std::string& iperf3, int seconds,
                                               bool bidir, const std::string& log_dir) {
  const std::string port = "5201", tag = bidir ? "bidir" : "one-way";
  // One-off server (-1) in B, bound to B's address; the client in A retries until it listens.
  std::vector<std::string> server = hosts.exec_prefix(1);
  server.insert(server.end(), {iperf3, "-s", "-1", "-B", hosts.address(1), "-p", port});
  auto srv = launch("iperf3 server", server, log_dir + "/iperf3-server-" + tag + ".log");
  if (!srv.ok()) return srv.status();
  std::vector<std::string> client = hosts.exec_prefix(0);
  client.insert(client.end(), {iperf3, "-c", hosts.address(1), "-p", port, "-t", std::to_string(seconds), "-J"});
  if (bidir) client.push_back("--bidir");
  Output out;
  double forward = 0, reverse = 0;
  // iperf3 -J may exit 0 with an "error" in its JSON (connection refused): the rates say.
  for (int attempt = 0; attempt < 50 && (forward <= 0 || reverse <= 0); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    out = run(client, log_dir + "/iperf3-client-" + tag + ".json", std::chrono::seconds(seconds + 20));
    nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
    auto rate = [&](const char* pointer) {
      return doc.is_discarded() ? 0.0 : doc.value(nlohmann::json::json_pointer(pointer), 0.0) / 1e9;
    };
    forward = out.exit_code == 0 ? rate("/end/sum_received/bits_per_second") : 0;
    reverse = bidir ? rate("/end/sum_received_bidir_reverse/bits_per_second") : forward;
  }
  if (!wait_process(srv->pid, std::chrono::milliseconds(2000)).ok())
    (void)stop_process(srv->pid, std::chrono::milliseconds(500));
  if (forward <= 0 || reverse <= 0) {
    return io_error("--netns: `" + joined(client) + "` gave no bandwidth (exit " + std::to_string(out.exit_code) +
                    "): " + out.text.substr(0, 600));
  }
  return std::make_pair(forward, reverse);
}

}  // namespace

Expected<LinkBandwidth> measure_link(const NetnsHosts& hosts, int seconds, const std::string& log_dir) {
  const std::string iperf3 = find_in_path("iperf3");
  if (iperf3.empty()) return invalid_argument("--netns measures the link with iperf3, which is not installed");
  LinkBandwidth link;
  auto one_way = run_iperf3(hosts, iperf3, seconds, /*bidir=*/false, log_dir);
  if (!one_way.ok()) return one_way.status();
  link.one_way = one_way->first;
  auto both = run_iperf3(hosts, iperf3, seconds, /*bidir=*/true, log_dir);
  if (!both.ok()) return both.status();
  link.bidir = (both->first + both->second) / 2;
  return link;
}

}  // namespace troupe::cli
