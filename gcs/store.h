// The GCS storage seam: tables (key -> bytes), bounded streams (events, metrics) and change
// notifications. RedisStore (gcs/redis_store.h) is the real one; InMemoryStore
// (gcs/in_memory_store.h) serves unit tests of the layers above, with the same semantics.
//
// Every call is bounded by the store's deadline (StoreOptions): none blocks forever. Errors are
// Status values: `unavailable` (server down or unreachable after the reconnect budget), `timeout`,
// `corrupt_data` (a reply of an unexpected shape), `invalid_argument` (bad names).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace troupe::gcs {

// One entry of a stream: its id (monotonic, "<ms>-<seq>" in Redis) and payload.
struct StreamEntry {
  std::string id;
  std::string value;
};

// A change notification delivered to subscribers.
struct Notification {
  std::string channel;
  std::string message;
};

// A live subscription to one or more channels, on its own connection. Delivery is at most once:
// after its connection was lost and re-established (RedisStore), next() returns one notification
// with an empty channel, meaning "messages may have been missed: re-read what you watch".
class Subscription {
 public:
  virtual ~Subscription() = default;
  // Waits up to `timeout` for the next notification; nullopt when none arrived in time. Re-
  // establishing a lost connection may take up to the store's reconnect budget on top.
  virtual Expected<std::optional<Notification>> next(std::chrono::milliseconds timeout) = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // ---- tables: named maps from key to bytes ----
  virtual Status put(const std::string& table, const std::string& key, const std::string& value) = 0;
  // Stores only if the key is absent; true when stored.
  virtual Expected<bool> put_if_absent(const std::string& table, const std::string& key,
                                       const std::string& value) = 0;
  // Replaces the value of `key` with `desired` only if it is present and equals `expected`
  // byte for byte; true when replaced, false when the key is absent or holds anything else (the
  // caller re-reads and decides again). Atomic against every other writer of the store, in this
  // process or any other: the one primitive for read-modify-write of a shared record (shard
  // claims, data/shards/shard_ledger.h). Publishes nothing.
  virtual Expected<bool> compare_and_set(const std::string& table, const std::string& key,
                                         const std::string& expected, const std::string& desired) = 0;
  // nullopt when the key is absent.
  virtual Expected<std::optional<std::string>> get(const std::string& table, const std::string& key) = 0;
  // Removing an absent key is not an error.
  virtual Status remove(const std::string& table, const std::string& key) = 0;
  // Removes every one of `keys` (absent ones are no error). RedisStore sends one HDEL; this default
  // calls remove() per key. On error some keys may have been removed.
  virtual Status remove_many(const std::string& table, const std::vector<std::string>& keys) {
    for (const std::string& key : keys) TROUPE_RETURN_IF_ERROR(remove(table, key));
    return {};
  }
  // Every (key, value) of the table, in no particular order.
  virtual Expected<std::vector<std::pair<std::string, std::string>>> get_all(const std::string& table) = 0;
  // Every key of the table, in no particular order, without the values (a page of a long table
  // reads its keys, then only the rows it shows). This default reads every row with get_all.
  virtual Expected<std::vector<std::string>> keys(const std::string& table) {
    auto all = get_all(table);
    if (!all.ok()) return all.status();
    std::vector<std::string> out;
    out.reserve(all->size());
    for (auto& row : *all) out.push_back(std::move(row.first));
    return out;
  }
  // The value of each of `keys`, in their order; nullopt for a key that is absent (removed since it
  // was listed). RedisStore asks in one round trip (HMGET); this default calls get() per key.
  virtual Expected<std::vector<std::optional<std::string>>> get_many(const std::string& table,
                                                                     const std::vector<std::string>& keys) {
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    for (const std::string& key : keys) {
      auto value = get(table, key);
      if (!value.ok()) return value.status();
      out.push_back(std::move(*value));
    }
    return out;
  }
  // Writes every row, then publishes each row's key on `channel` unless it is empty. RedisStore sends
  // all of it in one round trip (pipelined); this default calls put() and publish() per row. On
  // error some rows may have been written (each one whole) and their notifications may be missing.
  virtual Status put_many(const std::string& table, const std::vector<std::pair<std::string, std::string>>& rows,
                          const std::string& channel) {
    for (const auto& [key, value] : rows) TROUPE_RETURN_IF_ERROR(put(table, key, value));
    if (channel.empty()) return {};
    for (const auto& row : rows) TROUPE_RETURN_IF_ERROR(publish(channel, row.first));
    return {};
  }

  // ---- streams: append-only logs trimmed to about `max_len` newest entries ----
  virtual Expected<std::string> append(const std::string& stream, const std::string& value, size_t max_len) = 0;
  // The newest `count` entries, oldest first.
  virtual Expected<std::vector<StreamEntry>> read_recent(const std::string& stream, size_t count) = 0;
  // Up to `count` entries with ids after `after_id` ("" or "0": from the start), oldest first.
  virtual Expected<std::vector<StreamEntry>> read_after(const std::string& stream, const std::string& after_id,
                                                       size_t count) = 0;

  // ---- notifications ----
  virtual Status publish(const std::string& channel, const std::string& message) = 0;
  virtual Expected<std::unique_ptr<Subscription>> subscribe(const std::vector<std::string>& channels) = 0;

  // Round trip to the server (or nothing, in memory): ok when it answers within the deadline.
  virtual Status ping() = 0;
  // "redis 127.0.0.1:6390" or "memory", for messages and status output.
  virtual std::string describe() const = 0;
};

}  // namespace troupe::gcs
