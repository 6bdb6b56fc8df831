// The Store over a Redis server (gcs/redis_client.h). Key layout, under a namespace prefix
// (default "troupe", so several clusters or test runs can share one server):
//
//   <prefix>:t:<table>    hash   key -> record bytes    HSET, HSETNX, HGET, HDEL, HGETALL, and an
//                                                       EVAL script for compare_and_set
//   <prefix>:s:<stream>   stream entries {v: bytes}     XADD MAXLEN ~ n, XREVRANGE, XRANGE (exclusive)
//   <prefix>:c:<channel>  pub/sub channel               PUBLISH, SUBSCRIBE (own connection)
//
// Thread-safe: one connection shared under a lock; every subscription has its own connection.
// Streams are trimmed approximately (MAXLEN ~): a stream keeps at least `max_len` and at most about
// `max_len` + 100 entries (Redis trims whole stream nodes of stream-node-max-entries, 100 by
// default), which is far cheaper than exact trimming.
//
// A conditional write (put_if_absent, compare_and_set) whose connection dropped or whose reply did
// not come in time is settled by reading the field (retried like every read): the desired value
// there means it was applied, the precondition means it was not (it is sent again, up to 3 times),
// anything else is another writer's (false). So a GCS restart mid-write is neither an error nor a
// double write for them. Plain appends to streams are not retried (they could be doubled).
//
// Pub/sub is at-most-once: messages published while a subscriber's connection is down are lost.
// A subscription reconnects by itself and then returns one Notification with an empty channel
// (kResyncChannel): "messages may have been missed; re-read what you watch".
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "gcs/redis_client.h"
#include "gcs/store.h"

namespace troupe::gcs {

// The channel of the notification a subscription returns after it had to reconnect.
constexpr const char* kResyncChannel = "";

struct RedisStoreOptions {
  RedisOptions redis;
  std::string prefix = "troupe";  // namespace of every key; [A-Za-z0-9_.-]+
};

class RedisStore final : public Store {
 public:
  // Connects (within the reconnect budget of options.redis) and checks the server answers.
  // Errors: unavailable, invalid_argument (bad prefix, password refused).
  static Expected<std::unique_ptr<RedisStore>> connect(const RedisStoreOptions& options);

  Status put(const std::string& table, const std::string& key, const std::string& value) override;
  Expected<bool> put_if_absent(const std::string& table, const std::string& key, const std::string& value) override;
  Expected<bool> compare_and_set(const std::string& table, const std::string& key, const std::string& expected,
                                 const std::string& desired) override;
  Expected<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  Status remove(const std::string& table, const std::string& key) override;
  Status remove_many(const std::string& table, const std::vector<std::string>& keys) override;
  Expected<std::vector<std::pair<std::string, std::string>>> get_all(const std::string& table) override;
  Expected<std::vector<std::string>> keys(const std::string& table) override;
  Expected<std::vector<std::optional<std::string>>> get_many(const std::string& table,
                                                             const std::vector<std::string>& keys) override;
  Expected<std::string> append(const std::string& stream, const std::string& value, size_t max_len) override;
  Expected<std::vector<StreamEntry>> read_recent(const std::string& stream, size_t count) override;
  // `after_id` is "" or "0" (from the start) or an id returned by append ("<ms>-<seq>");
  // anything else is invalid_argument.
  Expected<std::vector<StreamEntry>> read_after(const std::string& stream, const std::string& after_id,
                                               size_t count) override;
  Status publish(const std::string& channel, const std::string& message) override;
  Expected<std::unique_ptr<Subscription>> subscribe(const std::vector<std::string>& channels) override;
  Status ping() override;
  std::string describe() const override;

  // One round trip: pipelined HSETs, then a PUBLISH per row.
  Status put_many(const std::string& table, const std::vector<std::pair<std::string, std::string>>& rows,
                  const std::string& channel) override;

  // The Redis key of a table, stream or channel (for tests and tools that look at Redis directly).
  std::string table_key(const std::string& table) const { return prefix_ + ":t:" + table; }
  std::string stream_key(const std::string& stream) const { return prefix_ + ":s:" + stream; }
  std::string channel_key(const std::string& channel) const { return prefix_ + ":c:" + channel; }

  // Direct access to the client, for tools and tests; callers must not use it concurrently with
  // the store from other threads.
  RedisClient& client() { return *client_; }

 private:
  RedisStore(RedisStoreOptions options, std::unique_ptr<RedisClient> client)
      : options_(std::move(options)), prefix_(options_.prefix), client_(std::move(client)) {}
  Expected<Reply> run(const std::vector<std::string>& argv);
  Expected<bool> conditional_write(const std::vector<std::string>& argv, const std::string& what,
                                   const std::string& table, const std::string& key,
                                   const std::optional<std::string>& precondition, const std::string& desired);
  Expected<std::vector<StreamEntry>> parse_entries(const Reply& reply, const std::string& stream) const;

  RedisStoreOptions options_;
  std::string prefix_;
  std::mutex mu_;
  std::unique_ptr<RedisClient> client_;
};

}  // namespace troupe::gcs
