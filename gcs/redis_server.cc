#include "gcs/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gcs/child_process.h"

namespace troupe::gcs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// 32 hex characters from the kernel's CSPRNG.
Expected<std::string> random_password() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

// A value for redis.conf, double-quoted with backslashes and quotes escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool log_says_port_in_use(const std::string& log) { return log.find("Address already in use") != std::string::npos; }

}  // namespace

Expected<int> pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return io_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return io_error(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(err));
  return static_cast<int>(ntohs(addr.sin_port));
}

Expected<std::unique_ptr<RedisServer>> RedisServer::start(const RedisServerOptions& options) {
  if (options.session_dir.empty()) return invalid_argument("redis server: no session directory given");
  if (options.port < 0 || options.port > 65535) {
    return invalid_argument("redis server: port " + std::to_string(options.port) + " out of range (0..65535)");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.session_dir, ec);
  if (ec) return io_error("cannot create session directory " + options.session_dir + ": " + ec.message());

  std::unique_ptr<RedisServer> server(new RedisServer(options));
  server->options_.session_dir = std::filesystem::absolute(options.session_dir).string();
  server->host_ = options.bind == "0.0.0.0" ? "127.0.0.1" : options.bind;
  auto binary = find_executable(options.redis_server.empty() ? "redis-server" : options.redis_server);
  if (!binary.ok()) return invalid_argument(binary.status().message());
  server->binary_ = *binary;
  if (server->options_.password.empty()) {
    auto pw = random_password();
    if (!pw.ok()) return pw.status();
    server->options_.password = *pw;
  }
  // A port picked here may be taken by someone else before redis binds it: pick again then.
  const bool pick = options.port == 0;
  for (int attempt = 1;; ++attempt) {
    if (pick) {
      auto port = pick_free_port();
      if (!port.ok()) return port.status();
      server->options_.port = *port;
    }
    Status st = server->launch();
    if (st.ok()) return server;
    if (!pick || attempt >= 3 || !log_says_port_in_use(last_lines(server->log_file(), 5))) return st;
  }
}

RedisServer::~RedisServer() {
  if (!options_.detach) (void)stop();
}

RedisOptions RedisServer::client_options() const {
  RedisOptions o;
  o.host = host_;
  o.port = options_.port;
  o.password = options_.password;
  return o;
}

Status RedisServer::write_config() const {
  const std::string path = conf_file();
  {
    std::ofstream out(path, std::ios::trunc);
    out << "# Written by troupe for the embedded GCS server; rewritten on every start.\n"
        << "bind " << options_.bind << "\n"
        << "requirepass " << quoted(options_.password) << "\n"
        << "dir " << quoted(options_.session_dir) << "\n"
        << "logfile " << quoted(log_file()) << "\n"
        << "daemonize no\n"
        << "appendonly yes\n"
        << "appendfsync always\n"
        << "save \"\"\n";
    if (options_.tls.enabled()) {
      // The GCS off the head's host carries the password and every record: TLS only, both ends
      // authenticated by the cluster's CA (Debian's hiredis 0.14 has no TLS: the clients connect
      // through tls/tls_relay.h).
      out << "port 0\ntls-port " << options_.port << "\ntls-cert-file " << quoted(options_.tls.cert)
          << "\ntls-key-file " << quoted(options_.tls.key) << "\ntls-ca-cert-file " << quoted(options_.tls.ca)
          << "\ntls-auth-clients yes\ntls-protocols \"TLSv1.3\"\n";
    } else {
      out << "port " << options_.port << "\n";
    }
    if (!out) return io_error("cannot write " + path + " — check the session directory is writable");
  }
  ::chmod(path.c_str(), 0600);  // it holds the password
  return {};
}

Status RedisServer::launch() {
  TROUPE_RETURN_IF_ERROR(write_config());
  SpawnOptions spawn_options;
  spawn_options.argv = {binary_, conf_file()};
  spawn_options.output_file = log_file();
  spawn_options.detach = options_.detach;
  auto pid = spawn(spawn_options);
  if (!pid.ok()) return pid.status().with_context("starting redis-server for " + options_.session_dir);
  pid_ = *pid;
  Status ready = wait_ready();
  if (!ready.ok()) {
    (void)terminate_process(pid_, !options_.detach, options_.stop_timeout);
    pid_ = -1;
    return ready;
  }
  if (options_.detach) {
    std::ofstream out(pid_file(), std::ios::trunc);
    out << pid_ << "\n";
    if (!out) {
      (void)terminate_process(pid_, false, options_.stop_timeout);
      pid_ = -1;
      return io_error("cannot write " + pid_file() + "; the server was stopped");
    }
  }
  return {};
}

Status RedisServer::wait_ready() {
  const auto start = Clock::now();
  const auto deadline = start + options_.start_timeout;
  const std::string where = "redis-server on " + host_ + ":" + std::to_string(options_.port);
  RedisOptions probe = client_options();
  probe.connect_timeout = milliseconds(500);
  probe.command_timeout = milliseconds(1000);
  probe.reconnect_attempts = 1;
  Status last;
  while (Clock::now() < deadline) {
    int status = 0;
    const bool exited = options_.detach ? !process_alive(pid_) : child_exited(pid_, &status);
    if (exited) {
      pid_ = -1;
      return unavailable(where + (options_.detach ? " exited" : " " + describe_exit(status)) +
                         " during start; see " + log_file() + ": " + last_lines(log_file(), 3));
    }
    auto client = RedisClient::connect(probe);
    if (client.ok()) return {};
    last = client.status();
    if (last.code() == Code::invalid_argument) {
      // Something else answers on this port, with another password: not our server.
      return unavailable(where + ": the port answers but refuses our password (" + last.message() +
                         ") — another redis is using port " + std::to_string(options_.port) + "; see " + log_file());
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return unavailable(where + " did not answer PING within " + std::to_string(options_.start_timeout.count()) +
                     " ms (" + last.message() + "); see " + log_file() + ": " + last_lines(log_file(), 3));
}

Status RedisServer::stop() {
  if (pid_ <= 0) return {};
  Status st = terminate_process(pid_, !options_.detach, options_.stop_timeout);
  if (!st.ok()) return st.with_context("stopping redis-server (" + log_file() + ")");
  pid_ = -1;
  if (options_.detach) std::remove(pid_file().c_str());
  return {};
}

Status RedisServer::restart() {
  TROUPE_RETURN_IF_ERROR(stop());
  return launch();
}

Status stop_pid(const std::string& pid_file, milliseconds timeout) {
  std::ifstream in(pid_file);
  if (!in) return not_found("no pid file " + pid_file + " — is a server running from this session directory?");
  long pid = 0;
  if (!(in >> pid) || pid <= 1) return corrupt_data(pid_file + " does not hold a process id; remove it");
  in.close();
  // A stale pid may now name another process: only signal a redis-server.
  std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmd((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  if (process_alive(static_cast<pid_t>(pid)) && cmd.find("redis-server") != std::string::npos) {
    TROUPE_RETURN_IF_ERROR(terminate_process(static_cast<pid_t>(pid), false, timeout));
  }
  std::remove(pid_file.c_str());
  return {};
}

}  // namespace troupe::gcs
