#include "cli/session.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/process.h"

namespace troupe::cli {

namespace fs = std::filesystem;

Session Session::current() {
  if (const char* h = std::getenv("TROUPE_HOME"); h && *h) return Session(h);
  if (const char* home = std::getenv("HOME"); home && *home) return Session(std::string(home) + "/.troupe");
  return Session("/tmp/troupe-" + std::to_string(::getuid()));
}

Session::Session(std::string home) : home_(std::move(home)) {}

Status Session::create() const {
  for (const std::string& d : {dir() + "/pids", log_dir(), redis_dir()}) {
    std::error_code ec;
    fs::create_directories(d, ec);
    if (ec) return io_error("cannot create session directory '" + d + "': " + ec.message() + "; set TROUPE_HOME");
  }
  ::chmod(dir().c_str(), 0700);
  return {};
}

Status Session::write_cluster(const ClusterInfo& c) const {
  nlohmann::json j{{"redis_host", c.redis_host}, {"redis_port", c.redis_port},
                   {"redis_password", c.redis_password}, {"embedded_redis", c.embedded_redis},
                   {"head_address", c.head_address}, {"token", c.token}, {"version", c.version},
                   {"started_ms", c.started_ms}, {"cluster_file", c.cluster_file},
                   {"slurm_job", c.slurm_job},
                   {"tls", {{"ca", c.tls.ca}, {"cert", c.tls.cert}, {"key", c.tls.key}}}};
  const std::string tmp = cluster_file() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << j.dump(2) << "\n")) return io_error("cannot write '" + tmp + "'");
  }
  ::chmod(tmp.c_str(), 0600);
  std::error_code ec;
  fs::rename(tmp, cluster_file(), ec);
  if (ec) return io_error("cannot rename '" + tmp + "' to '" + cluster_file() + "': " + ec.message());
  return {};
}

Expected<ClusterInfo> Session::read_cluster() const {
  std::ifstream f(cluster_file());
  if (!f) {
    return not_found("no cluster is up here: " + cluster_file() + " does not exist; start one with `troupe up`");
  }
  nlohmann::json j;
  try {
    f >> j;
    ClusterInfo c;
    c.redis_host = j.at("redis_host").get<std::string>();
    c.redis_port = j.at("redis_port").get<int>();
    c.redis_password = j.at("redis_password").get<std::string>();
    c.embedded_redis = j.at("embedded_redis").get<bool>();
    c.head_address = j.at("head_address").get<std::string>();
    c.token = j.at("token").get<std::string>();
    c.version = j.at("version").get<std::string>();
    c.started_ms = j.at("started_ms").get<int64_t>();
    c.cluster_file = j.value("cluster_file", std::string());
    c.slurm_job = j.value("slurm_job", std::string());
    if (j.contains("tls")) {
      c.tls.ca = j["tls"].value("ca", std::string());
      c.tls.cert = j["tls"].value("cert", std::string());
      c.tls.key = j["tls"].value("key", std::string());
    }
    if (c.tls.enabled() && !std::getenv("TROUPE_TLS_CA")) tls::set_environment(c.tls, false);
    return c;
  } catch (const nlohmann::json::exception& e) {
    return corrupt_data(cluster_file() + " is not a valid session file (" + e.what() +
                        "); run `troupe down` to clear it");
  }
}

std::vector<SessionProcess> Session::processes() const {
  std::vector<SessionProcess> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir() + "/pids", ec)) {
    if (e.path().extension() != ".pid") continue;
    auto pid = read_pid_file(e.path().string());
    if (!pid.ok()) continue;
    out.push_back({e.path().stem().string(), *pid, process_alive(*pid)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.role < b.role; });
  return out;
}

Status Session::clear() const {
  std::error_code ec;
  fs::remove(cluster_file(), ec);
  fs::remove_all(dir() + "/pids", ec);
  if (ec) return io_error("cannot clear session files in '" + dir() + "': " + ec.message());
  return {};
}

std::string random_token() {
  std::random_device rd;
  std::ostringstream os;
  for (int i = 0; i < 4; ++i) {
    os << std::hex;
    uint32_t v = rd();
    for (int b = 0; b < 8; ++b) os << ((v >> (4 * b)) & 0xf);
  }
  return os.str();
}

}  // namespace troupe::cli
