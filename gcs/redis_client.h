// A small synchronous Redis client over hiredis: binary-safe commands, pipelining, AUTH, deadlines
// on every wait, and reconnection with exponential backoff inside a budget.
//
// Failure model (every message names the server, "redis 127.0.0.1:6390", and the command):
//   * connection refused / lost, reconnect budget spent  -> unavailable
//   * no reply within command_timeout                     -> timeout (the connection is dropped, so
//                                                            a late reply cannot be mistaken for the
//                                                            next command's)
//   * wrong or missing password                           -> invalid_argument ("check
//                                                            --redis-password"): retrying cannot fix
//                                                            a configuration error, so it is never
//                                                            retried
//   * an error reply of the server (command()/check())    -> WRONGTYPE: corrupt_data; LOADING, BUSY,
//                                                            OOM, READONLY: unavailable; NOAUTH,
//                                                            WRONGPASS: invalid_argument; other:
//                                                            internal (troupe sent a bad command)
// Before each command the client checks that an idle connection was not closed by the server (a
// restart) and reconnects first, so a command is only ever sent on a live connection. When the
// connection drops while a command is in flight, or its reply does not come within command_timeout
// (a frozen or hung server), a pipeline of idempotent commands (is_idempotent) is retried once after
// reconnecting (which waits, within the reconnect budget, for a server that answers PING); any other
// is reported as unavailable (it may have been applied) or timeout.
//
// Not thread-safe: one client per thread, or a lock around it (RedisStore holds one).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

struct redisContext;

namespace troupe::gcs {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;  // empty: no AUTH
  std::chrono::milliseconds connect_timeout{2000};   // one TCP connect + AUTH + PING
  std::chrono::milliseconds command_timeout{5000};   // waiting for one reply (or one pipeline's)
  // Reconnecting (also the first connect): at most `reconnect_attempts` tries and never past
  // `reconnect_deadline` after the first one, sleeping backoff_initial, 2x, 4x ... up to
  // backoff_max in between.
  int reconnect_attempts = 8;
  std::chrono::milliseconds reconnect_deadline{10000};
  std::chrono::milliseconds backoff_initial{50};
  std::chrono::milliseconds backoff_max{1000};
};

// `o` made to wait out a server that is away for up to `outage` (killed and restarted by the head's
// watchdog, frozen, or cut off): reconnecting tries until `outage` has passed, however many
// attempts that takes. For the clients of processes that must not give up on the cluster (nodes,
// job workers, `troupe submit`'s follower); the head's own stays short, as it answers others.
RedisOptions riding_out(RedisOptions o, std::chrono::milliseconds outage);

// A reply of the server as a value (no hiredis object escapes the client).
struct Reply {
  enum class Type { nil, status, error, integer, string, array };
  Type type = Type::nil;
  std::string str;              // status, error and string replies
  int64_t integer = 0;          // integer replies
  std::vector<Reply> elements;  // array replies

  bool is_nil() const { return type == Type::nil; }
  bool is_error() const { return type == Type::error; }
  bool is_string() const { return type == Type::string; }
  bool is_integer() const { return type == Type::integer; }
  bool is_array() const { return type == Type::array; }
  // "nil", "status", "error", ... for messages.
  const char* type_name() const;
};

class RedisClient {
 public:
  // Connects (within the reconnect budget), authenticates and checks the server answers PING.
  // Errors: unavailable (not reachable in the budget), invalid_argument (password refused).
  static Expected<std::unique_ptr<RedisClient>> connect(const RedisOptions& options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Sends one command (arguments are binary-safe) and waits for its reply. An error reply of the
  // server is returned as a Status (see the failure model above), never as a Reply.
  Expected<Reply> command(const std::vector<std::string>& argv);

  // Sends all commands at once, then reads their replies in order (one round trip). Error replies
  // of single commands come back as Reply values of Type::error (check() turns one into a Status);
  // a failed connection or timeout fails the whole call. The pipeline is retried once after a
  // dropped connection only when every command in it is idempotent.
  Expected<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string>>& commands);

  // ---- for subscriber connections (RESP2 push messages) ----
  // Sends a command without waiting for its reply. Reconnects first if the connection is down.
  Status send(const std::vector<std::string>& argv);
  // Waits up to `timeout` for the next reply or pushed message; nullopt when none arrived in time
  // (the connection stays usable). unavailable when the connection is lost (it is not retried:
  // call reconnect()).
  Expected<std::optional<Reply>> receive(std::chrono::milliseconds timeout);
  // Drops the connection and connects again within the reconnect budget.
  Status reconnect();

  // ok when `reply` is not an error reply; else the Status for it, naming the server and `argv`.
  Status check(const Reply& reply, const std::vector<std::string>& argv) const;

  // "redis 127.0.0.1:6390", the prefix of every message.
  std::string address() const;
  const RedisOptions& options() const { return options_; }
  // How many times the connection was re-established since connect() (for tests and status).
  int reconnects() const { return reconnects_; }

  // Whether sending `command` (e.g. "HSET") twice has the effect of sending it once. PUBLISH counts
  // as idempotent here: a notification only says "look again", so a duplicate is harmless.
  static bool is_idempotent(const std::string& command);

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

  explicit RedisClient(RedisOptions options) : options_(std::move(options)) {}
  Status connect_once(std::chrono::milliseconds timeout);
  Status connect_with_budget();
  Status ensure_connected();
  // Sends the commands and reads one reply each; on failure drops the connection.
  Status exchange(const std::vector<std::vector<std::string>>& commands, std::vector<Reply>* replies,
                  bool* connection_lost);
  Status context_error(const std::string& what, bool* connection_lost);
  std::string describe(const std::vector<std::string>& argv) const;

  RedisOptions options_;
  ContextPtr ctx_;
  int reconnects_ = 0;
};

}  // namespace troupe::gcs
