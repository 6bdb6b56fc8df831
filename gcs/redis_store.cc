#include "gcs/redis_store.h"

#include <algorithm>
#include <cctype>

namespace troupe::gcs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Names of tables, streams, channels and the prefix: [A-Za-z0-9_./-]+, so keys stay readable in
// redis-cli and one name can never spell another's key.
Status check_name(const std::string& what, const std::string& name) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-';
  });
  if (ok) return {};
  return invalid_argument(what + " name '" + name + "' is empty or has characters other than [A-Za-z0-9_./-]");
}

// "0", "<ms>" or "<ms>-<seq>", digits only.
bool valid_stream_id(const std::string& id) {
  const size_t dash = id.find('-');
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (dash == std::string::npos) return digits(id);
  return digits(id.substr(0, dash)) && digits(id.substr(dash + 1));
}

class RedisSubscription final : public Subscription {
 public:
  RedisSubscription(std::unique_ptr<RedisClient> client, std::vector<std::string> keys, size_t prefix_len)
      : client_(std::move(client)), keys_(std::move(keys)), prefix_len_(prefix_len) {}

  // Sends SUBSCRIBE and waits (command_timeout) until the server confirmed every channel.
  Status start() {
    std::vector<std::string> argv{"SUBSCRIBE"};
    argv.insert(argv.end(), keys_.begin(), keys_.end());
    TROUPE_RETURN_IF_ERROR(client_->send(argv));
    const auto deadline = Clock::now() + client_->options().command_timeout;
    size_t confirmed = 0;
    while (confirmed < keys_.size()) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      auto r = client_->receive(std::max(left, milliseconds(0)));
      if (!r.ok()) return r.status();
      if (!r->has_value()) {
        return Status(Code::timeout, client_->address() + ": SUBSCRIBE not confirmed within " +
                                         std::to_string(client_->options().command_timeout.count()) + " ms");
      }
      const Reply& m = **r;
      if (m.is_error()) return client_->check(m, argv);
      if (m.is_array() && !m.elements.empty() && m.elements[0].str == "subscribe") ++confirmed;
    }
    return {};
  }

  Expected<std::optional<Notification>> next(milliseconds timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (resync_) {
        // The connection was lost: connect and subscribe again (within the client's reconnect
        // budget), then tell the caller that messages may have been missed.
        TROUPE_RETURN_IF_ERROR(client_->reconnect());
        TROUPE_RETURN_IF_ERROR(start());
        resync_ = false;
        return std::optional<Notification>(Notification{kResyncChannel, ""});
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      auto r = client_->receive(std::max(left, milliseconds(0)));
      if (!r.ok()) {
        if (r.status().code() != Code::unavailable) return r.status();
        resync_ = true;
        continue;
      }
      if (!r->has_value()) return std::optional<Notification>{};
      const Reply& m = **r;
      // ["message", channel, payload]; confirmations and anything else are skipped.
      if (m.is_array() && m.elements.size() == 3 && m.elements[0].str == "message") {
        std::string channel = m.elements[1].str;
        channel.erase(0, std::min(prefix_len_, channel.size()));
        return std::optional<Notification>(Notification{std::move(channel), m.elements[2].str});
      }
    }
  }

 private:
  std::unique_ptr<RedisClient> client_;
  std::vector<std::string> keys_;
  size_t prefix_len_;
  bool resync_ = false;
};

}  // namespace

Expected<std::unique_ptr<RedisStore>> RedisStore::connect(const RedisStoreOptions& options) {
  TROUPE_RETURN_IF_ERROR(check_name("redis prefix", options.prefix));
  auto client = RedisClient::connect(options.redis);
  if (!client.ok()) return client.status();
  return std::unique_ptr<RedisStore>(new RedisStore(options, std::move(client.value())));
}

std::string RedisStore::describe() const { return client_->address() + " (prefix " + prefix_ + ")"; }

Expected<Reply> RedisStore::run(const std::vector<std::string>& argv) {
  std::lock_guard<std::mutex> lock(mu_);
  return client_->command(argv);
}

Status RedisStore::ping() {
  auto r = run({"PING"});
  return r.ok() ? Status{} : r.status();
}

Status RedisStore::put(const std::string& table, const std::string& key, const std::string& value) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  auto r = run({"HSET", table_key(table), key, value});
  return r.ok() ? Status{} : r.status();
}

Status RedisStore::put_many(const std::string& table, const std::vector<std::pair<std::string, std::string>>& rows,
                            const std::string& channel) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  if (!channel.empty()) TROUPE_RETURN_IF_ERROR(check_name("channel", channel));
  if (rows.empty()) return {};
  std::vector<std::vector<std::string>> commands;
  commands.reserve(rows.size() * 2);
  const std::string tkey = table_key(table), ckey = channel_key(channel);
  for (const auto& [key, value] : rows) commands.push_back({"HSET", tkey, key, value});
  if (!channel.empty()) {
    for (const auto& row : rows) commands.push_back({"PUBLISH", ckey, row.first});
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto replies = client_->pipeline(commands);
  if (!replies.ok()) return replies.status();
  for (size_t i = 0; i < replies->size(); ++i) TROUPE_RETURN_IF_ERROR(client_->check((*replies)[i], commands[i]));
  return {};
}

// A command that is not idempotent (HSETNX, EVAL) may or may not have been applied when its
// connection dropped or its reply did not come in time. Conditional writes can tell which from the
// field afterwards: `desired` there means applied (ours), `precondition` means not applied (sent
// again, up to 3 times in all), anything else means another writer's value (a refusal, as the
// write would have been). The original error when the field cannot be read either. `argv` answers
// an integer, 1 when it wrote.
Expected<bool> RedisStore::conditional_write(const std::vector<std::string>& argv, const std::string& what,
                                             const std::string& table, const std::string& key,
                                             const std::optional<std::string>& precondition,
                                             const std::string& desired) {
  for (int attempt = 0;; ++attempt) {
    auto r = run(argv);
    if (r.ok()) {
      if (!r->is_integer()) return corrupt_data(describe() + ": " + what + " answered " + r->type_name() + ", not an integer");
      return r->integer == 1;
    }
    const Status failed = r.status().with_context(what + " " + table + "/" + key);
    if (attempt == 2 || (failed.code() != Code::unavailable && failed.code() != Code::timeout)) return failed;
    auto now = get(table, key);
    if (!now.ok()) return failed;
    if (*now == desired) return true;
    if (*now != precondition) return false;
  }
}

Expected<bool> RedisStore::put_if_absent(const std::string& table, const std::string& key, const std::string& value) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  return conditional_write({"HSETNX", table_key(table), key, value}, "HSETNX", table, key, std::nullopt, value);
}

// Redis runs a script without interleaving any other command, which makes the compare and the set
// one atomic step for every client of the server. Lua strings are binary-safe; HGET of an absent
// field is `false`, which never equals a string.
static const char* const kCompareAndSetScript =
    "if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then "
    "  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 "
    "end return 0";

Expected<bool> RedisStore::compare_and_set(const std::string& table, const std::string& key,
                                           const std::string& expected, const std::string& desired) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  return conditional_write({"EVAL", kCompareAndSetScript, "1", table_key(table), key, expected, desired},
                           "compare_and_set", table, key, expected, desired);
}

Expected<std::optional<std::string>> RedisStore::get(const std::string& table, const std::string& key) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  auto r = run({"HGET", table_key(table), key});
  if (!r.ok()) return r.status();
  if (r->is_nil()) return std::optional<std::string>{};
  if (!r->is_string()) return corrupt_data(describe() + ": HGET answered " + r->type_name() + ", not a string");
  return std::optional<std::string>(std::move(r->str));
}

Status RedisStore::remove(const std::string& table, const std::string& key) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  auto r = run({"HDEL", table_key(table), key});
  return r.ok() ? Status{} : r.status();
}

Status RedisStore::remove_many(const std::string& table, const std::vector<std::string>& keys) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  if (keys.empty()) return {};
  std::vector<std::string> argv{"HDEL", table_key(table)};
  argv.insert(argv.end(), keys.begin(), keys.end());
  auto r = run(argv);
  return r.ok() ? Status{} : r.status();
}

Expected<std::vector<std::pair<std::string, std::string>>> RedisStore::get_all(const std::string& table) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  auto r = run({"HGETALL", table_key(table)});
  if (!r.ok()) return r.status();
  if (!r->is_array() || r->elements.size() % 2 != 0) {
    return corrupt_data(describe() + ": HGETALL " + table_key(table) + " answered " + r->type_name() +
                        " of " + std::to_string(r->elements.size()) + " elements, not field/value pairs");
  }
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(r->elements.size() / 2);
  for (size_t i = 0; i < r->elements.size(); i += 2) {
    out.emplace_back(std::move(r->elements[i].str), std::move(r->elements[i + 1].str));
  }
  return out;
}

Expected<std::vector<std::string>> RedisStore::keys(const std::string& table) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  auto r = run({"HKEYS", table_key(table)});
  if (!r.ok()) return r.status();
  if (!r->is_array()) return corrupt_data(describe() + ": HKEYS " + table_key(table) + " answered " + r->type_name());
  std::vector<std::string> out;
  out.reserve(r->elements.size());
  for (Reply& e : r->elements) out.push_back(std::move(e.str));
  return out;
}

Expected<std::vector<std::optional<std::string>>> RedisStore::get_many(const std::string& table,
                                                                       const std::vector<std::string>& keys) {
  TROUPE_RETURN_IF_ERROR(check_name("table", table));
  std::vector<std::optional<std::string>> out;
  if (keys.empty()) return out;
  std::vector<std::string> argv{"HMGET", table_key(table)};
  argv.insert(argv.end(), keys.begin(), keys.end());
  auto r = run(argv);
  if (!r.ok()) return r.status();
  if (!r->is_array() || r->elements.size() != keys.size()) {
    return corrupt_data(describe() + ": HMGET " + table_key(table) + " answered " + r->type_name() + " of " +
                        std::to_string(r->elements.size()) + " elements for " + std::to_string(keys.size()) + " keys");
  }
  out.reserve(keys.size());
  for (Reply& e : r->elements) {
    if (e.is_nil()) {
      out.emplace_back();
    } else if (e.is_string()) {
      out.emplace_back(std::move(e.str));
    } else {
      return corrupt_data(describe() + ": HMGET " + table_key(table) + " answered a " + e.type_name() + " element");
    }
  }
  return out;
}

Expected<std::string> RedisStore::append(const std::string& stream, const std::string& value, size_t max_len) {
  TROUPE_RETURN_IF_ERROR(check_name("stream", stream));
  std::vector<std::string> argv{"XADD", stream_key(stream)};
  if (max_len > 0) argv.insert(argv.end(), {"MAXLEN", "~", std::to_string(max_len)});
  argv.insert(argv.end(), {"*", "v", value});
  auto r = run(argv);
  if (!r.ok()) return r.status();
  if (!r->is_string()) return corrupt_data(describe() + ": XADD answered " + r->type_name() + ", not an entry id");
  return std::move(r->str);
}

Expected<std::vector<StreamEntry>> RedisStore::parse_entries(const Reply& reply, const std::string& stream) const {
  const std::string where = describe() + ": stream " + stream_key(stream);
  if (!reply.is_array()) return corrupt_data(where + ": expected an array of entries, got " + reply.type_name());
  std::vector<StreamEntry> out;
  out.reserve(reply.elements.size());
  for (const Reply& e : reply.elements) {
    // [id, [field, value, ...]]
    if (!e.is_array() || e.elements.size() != 2 || !e.elements[0].is_string() || !e.elements[1].is_array()) {
      return corrupt_data(where + ": an entry is not [id, [field, value...]]");
    }
    const auto& fields = e.elements[1].elements;
    const std::string& id = e.elements[0].str;
    bool found = false;
    for (size_t i = 0; i + 1 < fields.size(); i += 2) {
      if (fields[i].str == "v") {
        out.push_back({id, fields[i + 1].str});
        found = true;
        break;
      }
    }
    if (!found) return corrupt_data(where + ": entry " + id + " has no field 'v' (written by another program?)");
  }
  return out;
}

Expected<std::vector<StreamEntry>> RedisStore::read_recent(const std::string& stream, size_t count) {
  TROUPE_RETURN_IF_ERROR(check_name("stream", stream));
  if (count == 0) return std::vector<StreamEntry>{};
  auto r = run({"XREVRANGE", stream_key(stream), "+", "-", "COUNT", std::to_string(count)});
  if (!r.ok()) return r.status();
  auto entries = parse_entries(*r, stream);
  if (entries.ok()) std::reverse(entries->begin(), entries->end());
  return entries;
}

Expected<std::vector<StreamEntry>> RedisStore::read_after(const std::string& stream, const std::string& after_id,
                                                         size_t count) {
  TROUPE_RETURN_IF_ERROR(check_name("stream", stream));
  if (!after_id.empty() && !valid_stream_id(after_id)) {
    return invalid_argument("stream " + stream + ": '" + after_id + "' is not a stream id (\"<ms>-<seq>\", or \"\" " +
                            "for the start)");
  }
  if (count == 0) return std::vector<StreamEntry>{};
  const std::string start = (after_id.empty() || after_id == "0") ? "-" : "(" + after_id;
  auto r = run({"XRANGE", stream_key(stream), start, "+", "COUNT", std::to_string(count)});
  if (!r.ok()) return r.status();
  return parse_entries(*r, stream);
}

Status RedisStore::publish(const std::string& channel, const std::string& message) {
  TROUPE_RETURN_IF_ERROR(check_name("channel", channel));
  auto r = run({"PUBLISH", channel_key(channel), message});
  return r.ok() ? Status{} : r.status();
}

Expected<std::unique_ptr<Subscription>> RedisStore::subscribe(const std::vector<std::string>& channels) {
  if (channels.empty()) return invalid_argument("subscribe: no channels given");
  std::vector<std::string> keys;
  for (const std::string& c : channels) {
    TROUPE_RETURN_IF_ERROR(check_name("channel", c));
    keys.push_back(channel_key(c));
  }
  auto client = RedisClient::connect(options_.redis);
  if (!client.ok()) return client.status().with_context("subscribing");
  auto sub = std::make_unique<RedisSubscription>(std::move(client.value()), std::move(keys), channel_key("").size());
  TROUPE_RETURN_IF_ERROR(sub->start());
  return std::unique_ptr<Subscription>(std::move(sub));
}

}  // namespace troupe::gcs
