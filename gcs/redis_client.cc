#include "gcs/redis_client.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <limits>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include <hiredis/hiredis.h>
#include <unistd.h>

#include "tls/tls_relay.h"

namespace troupe::gcs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(milliseconds ms) {
  const long long n = std::max<long long>(ms.count(), 1);
  timeval tv;
  tv.tv_sec = static_cast<time_t>(n / 1000);
  tv.tv_usec = static_cast<suseconds_t>((n % 1000) * 1000);
  return tv;
}

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = Reply::Type::string; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::status; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::error; out.str.assign(r->str, r->len); break;
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::integer; out.integer = r->integer; break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default: out.type = Reply::Type::nil; break;
  }
  return out;
}

// hiredis writes with write(2): a server that closed the connection would raise SIGPIPE and kill
// the process. Ignore it (once, and only where nobody installed a handler): writes then fail with
// EPIPE and are reported as a lost connection.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  });
}

// A short printable form of an argument, for messages (keys may be binary).
std::string printable(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 64) out += "...";
  return out;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

const char* Reply::type_name() const {
  switch (type) {
    case Type::nil: return "nil";
    case Type::status: return "status";
    case Type::error: return "error";
    case Type::integer: return "integer";
    case Type::string: return "string";
    case Type::array: return "array";
  }
  return "unknown";
}

void RedisClient::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisClient::~RedisClient() = default;

std::string RedisClient::address() const {
  return "redis " + options_.host + ":" + std::to_string(options_.port);
}

std::string RedisClient::describe(const std::vector<std::string>& argv) const {
  if (argv.empty()) return "(empty command)";
  std::string s = printable(argv[0]);
  // Never print AUTH's password; the key is enough to say what a command was about.
  if (argv.size() > 1 && argv[0] != "AUTH" && argv[0] != "auth") s += " " + printable(argv[1]);
  return s;
}

bool RedisClient::is_idempotent(const std::string& command) {
  static const char* const kIdempotent[] = {
      "PING",  "AUTH",   "SELECT",    "ECHO",   "GET",    "SET",  "DEL",     "EXISTS", "HGET",
      "HSET",  "HDEL",   "HGETALL",   "HLEN",   "HKEYS",  "HMGET", "XRANGE", "XREVRANGE", "XLEN",
      "TYPE",  "INFO",   "DBSIZE",    "PUBLISH", "SCAN",  "HSCAN", "KEYS",   "CONFIG",  "FLUSHALL"};
  std::string upper = command;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* name : kIdempotent) {
    if (upper == name) return true;
  }
  return false;
}

Status RedisClient::check(const Reply& reply, const std::vector<std::string>& argv) const {
  if (!reply.is_error()) return {};
  const std::string& e = reply.str;
  const std::string where = address() + ": " + describe(argv) + " failed: " + e;
  if (starts_with(e, "WRONGTYPE")) {
    return corrupt_data(where + " — another program wrote this key; use a separate --redis-prefix or clear it");
  }
  if (starts_with(e, "NOAUTH") || starts_with(e, "WRONGPASS")) {
    return invalid_argument(where + " — check --redis-password");
  }
  if (starts_with(e, "LOADING") || starts_with(e, "BUSY") || starts_with(e, "OOM") || starts_with(e, "READONLY") ||
      starts_with(e, "MASTERDOWN")) {
    return unavailable(where + " — the server cannot serve it now; retry later");
  }
  return internal_error(where + " (a bug in troupe: the server refused the command)");
}

Status RedisClient::connect_once(milliseconds timeout) {
  const auto start = Clock::now();
  ContextPtr c(redisConnectWithTimeout(options_.host.c_str(), options_.port, to_timeval(timeout)));
  if (!c) return unavailable(address() + ": cannot allocate a hiredis context");
  if (c->err) {
    return unavailable(address() + ": cannot connect: " + c->errstr +
                       " — is the server running and reachable? (`troupe up` starts one)");
  }
  auto tls = tls::process_tls();
  if (!tls.ok()) return tls.status().with_context(address());
  if (*tls) {
    // A cluster with TLS: the server's TLS port, through the relay (hiredis 0.14 speaks plain TCP).
    const int tcp = ::dup(c->fd);
    c.reset();
    if (tcp < 0) return io_error(address() + ": dup: " + std::strerror(errno));
    const auto left = std::max(milliseconds(1), timeout - std::chrono::duration_cast<milliseconds>(Clock::now() - start));
    auto plain = tls::wrap(tcp, **tls, tls::Role::client, left, address());
    if (!plain.ok()) return plain.status();  // a refused certificate is invalid_argument: no retry
    c.reset(redisConnectFd(*plain));
    if (!c || c->err) {
      if (!c) ::close(*plain);
      return unavailable(address() + ": hiredis cannot take the TLS connection");
    }
  }
  redisSetTimeout(c.get(), to_timeval(timeout));
  ctx_ = std::move(c);
  auto handshake = [&](const std::vector<std::string>& argv) -> Expected<Reply> {
    std::vector<Reply> replies;
    bool lost = false;
    TROUPE_RETURN_IF_ERROR(exchange({argv}, &replies, &lost));
    return replies[0];
  };
  if (!options_.password.empty()) {
    auto auth = handshake({"AUTH", options_.password});
    if (!auth.ok()) return auth.status();
    if (auth->is_error()) {
      ctx_.reset();
      return invalid_argument(address() + ": AUTH failed: " + auth->str + " — check --redis-password");
    }
  }
  auto pong = handshake({"PING"});
  if (!pong.ok()) return pong.status();
  if (pong->is_error()) {
    ctx_.reset();
    if (starts_with(pong->str, "NOAUTH")) {
      return invalid_argument(address() + ": the server requires a password (" + pong->str +
                              ") — pass --redis-password");
    }
    return unavailable(address() + ": not ready: " + pong->str);  // e.g. LOADING after a restart
  }
  redisSetTimeout(ctx_.get(), to_timeval(options_.command_timeout));
  return {};
}

Status RedisClient::connect_with_budget() {
  ignore_sigpipe_once();
  const auto start = Clock::now();
  const auto deadline = start + options_.reconnect_deadline;
  milliseconds delay = options_.backoff_initial;
  Status last;
  int attempt = 0;
  while (true) {
    ++attempt;
    const auto remaining = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    last = connect_once(std::min(options_.connect_timeout, std::max(remaining, milliseconds(1))));
    if (last.ok() || last.code() == Code::invalid_argument) return last;
    if (attempt >= options_.reconnect_attempts || Clock::now() + delay >= deadline) break;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, options_.backoff_max);
  }
  const auto spent = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  return unavailable(last.message() + " (gave up after " + std::to_string(attempt) + " attempt" +
                     (attempt == 1 ? "" : "s") + " in " + std::to_string(spent) + " ms)");
}

RedisOptions riding_out(RedisOptions o, milliseconds outage) {
  o.reconnect_deadline = std::max(o.reconnect_deadline, outage);
  o.reconnect_attempts = std::numeric_limits<int>::max();
  return o;
}

Expected<std::unique_ptr<RedisClient>> RedisClient::connect(const RedisOptions& options) {
  if (options.port <= 0 || options.port > 65535) {
    return invalid_argument("redis " + options.host + ":" + std::to_string(options.port) +
                            ": port out of range (1..65535)");
  }
  std::unique_ptr<RedisClient> client(new RedisClient(options));
  TROUPE_RETURN_IF_ERROR(client->connect_with_budget());
  return client;
}

Status RedisClient::reconnect() {
  ctx_.reset();
  TROUPE_RETURN_IF_ERROR(connect_with_budget());
  ++reconnects_;
  return {};
}

Status RedisClient::ensure_connected() {
  if (ctx_ && !ctx_->err) {
    // Between commands nothing may be readable: data or EOF means the server closed the connection
    // (a restart) or broke the protocol. Reconnect before sending rather than lose the command.
    pollfd p{ctx_->fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) return {};
  }
  return reconnect();
}

Status RedisClient::context_error(const std::string& what, bool* connection_lost) {
  const int err = errno;
  const int kind = ctx_ ? ctx_->err : REDIS_ERR_OTHER;
  const std::string detail = ctx_ ? ctx_->errstr : "no connection";
  ctx_.reset();  // never reuse a connection whose reply stream may be out of step
  if (kind == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK)) {
    *connection_lost = false;
    return Status(Code::timeout, address() + ": no reply to " + what + " within " +
                                     std::to_string(options_.command_timeout.count()) +
                                     " ms — the server is overloaded or stopped; see its log");
  }
  if (kind == REDIS_ERR_PROTOCOL || kind == REDIS_ERR_OOM) {
    *connection_lost = false;
    return corrupt_data(address() + ": " + what + ": bad reply (" + detail + ")");
  }
  *connection_lost = true;
  return unavailable(address() + ": connection lost during " + what + ": " + detail);
}

Status RedisClient::exchange(const std::vector<std::vector<std::string>>& commands, std::vector<Reply>* replies,
                             bool* connection_lost) {
  *connection_lost = false;
  if (!ctx_) {
    *connection_lost = true;
    return unavailable(address() + ": not connected");
  }
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const auto& argv : commands) {
    args.clear();
    lens.clear();
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), args.data(), lens.data()) != REDIS_OK) {
      return context_error(describe(argv), connection_lost);
    }
  }
  replies->clear();
  replies->reserve(commands.size());
  for (const auto& argv : commands) {
    void* raw = nullptr;
    errno = 0;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
      return context_error(describe(argv), connection_lost);
    }
    ReplyPtr reply(static_cast<redisReply*>(raw));
    replies->push_back(convert(reply.get()));
  }
  return {};
}

Expected<Reply> RedisClient::command(const std::vector<std::string>& argv) {
  auto replies = pipeline({argv});
  if (!replies.ok()) return replies.status();
  TROUPE_RETURN_IF_ERROR(check((*replies)[0], argv));
  return std::move((*replies)[0]);
}

Expected<std::vector<Reply>> RedisClient::pipeline(const std::vector<std::vector<std::string>>& commands) {
  std::vector<Reply> replies;
  if (commands.empty()) return replies;
  for (const auto& argv : commands) {
    if (argv.empty()) return invalid_argument(address() + ": empty command in a request (a bug in troupe)");
  }
  TROUPE_RETURN_IF_ERROR(ensure_connected());
  bool lost = false;
  Status st = exchange(commands, &replies, &lost);
  if (st.ok()) return replies;
  const bool retry =
      (lost || st.code() == Code::timeout) && std::all_of(commands.begin(), commands.end(), [](const auto& c) { return is_idempotent(c[0]); });
  if (!retry) {
    if (lost) return unavailable(st.message() + " — it may or may not have been applied");
    return st;
  }
  TROUPE_RETURN_IF_ERROR(reconnect());
  TROUPE_RETURN_IF_ERROR(exchange(commands, &replies, &lost));
  return replies;
}

Status RedisClient::send(const std::vector<std::string>& argv) {
  if (argv.empty()) return invalid_argument(address() + ": empty command (a bug in troupe)");
  if (!ctx_ || ctx_->err) TROUPE_RETURN_IF_ERROR(reconnect());
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  bool lost = false;
  if (redisAppendCommandArgv(ctx_.get(), static_cast<int>(argv.size()), args.data(), lens.data()) != REDIS_OK) {
    return context_error(describe(argv), &lost);
  }
  int done = 0;
  while (!done) {
    errno = 0;
    if (redisBufferWrite(ctx_.get(), &done) != REDIS_OK) return context_error(describe(argv), &lost);
  }
  return {};
}

Expected<std::optional<Reply>> RedisClient::receive(milliseconds timeout) {
  if (!ctx_ || ctx_->err) return unavailable(address() + ": not connected (call reconnect)");
  const auto deadline = Clock::now() + timeout;
  bool lost = false;
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return context_error("reading a message", &lost);
    if (raw) {
      ReplyPtr reply(static_cast<redisReply*>(raw));
      return std::optional<Reply>(convert(reply.get()));
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::optional<Reply>{};
    pollfd p{ctx_->fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return std::optional<Reply>{};
    errno = 0;
    if (redisBufferRead(ctx_.get()) != REDIS_OK) return context_error("reading a message", &lost);
  }
}

}  // namespace troupe::gcs
