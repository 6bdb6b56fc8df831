// Typed tables over a Store: one template serves every record type of gcs/records.h (and any record
// type with encode/decode/record_key overloads and a TableName, e.g. gcs/search_record.h). Writes
// also publish "<table>" notifications (message: the key) so watchers learn of changes without polling.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gcs/events.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

template <class Record>
class Table {
 public:
  explicit Table(Store& store) : store_(store) {}
  static const char* name() { return TableName<Record>::value; }

  // Stores the record under its key and notifies watchers of the table (one round trip on Redis).
  Status put(const Record& r) { return store_.put_many(name(), {{record_key(r), encode(r)}}, name()); }
  // Stores every record and notifies watchers of each, in one round trip on Redis. On error some
  // records may have been stored (each one whole).
  Status put_many(const std::vector<Record>& records) {
    std::vector<std::pair<std::string, std::string>> rows;
    rows.reserve(records.size());
    for (const Record& r : records) rows.emplace_back(record_key(r), encode(r));
    return store_.put_many(name(), rows, name());
  }
  // not_found when absent; version_mismatch / corrupt_data name the table and key.
  Expected<Record> get(const std::string& key) {
    auto bytes = store_.get(name(), key);
    if (!bytes.ok()) return bytes.status();
    if (!bytes->has_value()) return not_found(std::string(name()) + " has no record '" + key + "'");
    Record r;
    Status st = decode(**bytes, &r);
    if (!st.ok()) return st.with_context(std::string(name()) + "/" + key);
    return r;
  }
  Status remove(const std::string& key) {
    TROUPE_RETURN_IF_ERROR(store_.remove(name(), key));
    return store_.publish(name(), key);
  }
  // Every record; one that does not decode fails the call, naming its key (a table with a bad
  // record is reported, never silently shortened).
  Expected<std::vector<Record>> list() {
    auto all = store_.get_all(name());
    if (!all.ok()) return all.status();
    std::vector<Record> out;
    out.reserve(all->size());
    for (const auto& [key, bytes] : *all) {
      Record r;
      Status st = decode(bytes, &r);
      if (!st.ok()) return st.with_context(std::string(name()) + "/" + key);
      out.push_back(std::move(r));
    }
    return out;
  }
  // Every key of the table (no record read or decoded), in no particular order.
  Expected<std::vector<std::string>> keys() { return store_.keys(name()); }
  // The records under `keys`, in their order, skipping keys that are absent (removed since they
  // were listed); one that does not decode fails the call, naming its key.
  Expected<std::vector<Record>> get_many(const std::vector<std::string>& keys) {
    auto values = store_.get_many(name(), keys);
    if (!values.ok()) return values.status();
    std::vector<Record> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!(*values)[i]) continue;
      Record r;
      Status st = decode(*(*values)[i], &r);
      if (!st.ok()) return st.with_context(std::string(name()) + "/" + keys[i]);
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  Store& store_;
};

// Read-modify-write of the record under `key` of a shared table: reads it, lets `edit` change it and
// writes it back with compare-and-set (updated_ms = now), re-reading and editing again whenever
// another writer won in between, until the write wins or `timeout` passes. Returns the record as
// written. not_found "no <noun> <key>" when absent; the edit's error as is; timeout "updating <noun>
// <key's first 8>: other writers kept changing it for N ms". Publishes the key on the table's channel.
template <class Record>
Expected<Record> update_record(Store& store, const std::string& key, const std::string& noun,
                               const std::function<Status(Record&)>& edit, std::chrono::milliseconds timeout) {
  const char* table = TableName<Record>::value;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 0;; ++attempt) {
    auto bytes = store.get(table, key);
    if (!bytes.ok()) return bytes.status();
    if (!bytes->has_value()) return not_found("no " + noun + " " + key);
    Record r;
    Status st = decode(**bytes, &r);
    if (!st.ok()) return st.with_context(std::string(table) + "/" + key);
    TROUPE_RETURN_IF_ERROR(edit(r));
    r.updated_ms = now_ms();
    auto swapped = store.compare_and_set(table, key, **bytes, encode(r));
    if (!swapped.ok()) return swapped.status();
    if (*swapped) {
      Status pub = store.publish(table, key);
      (void)pub;  // watchers also poll; a lost notification only delays them
      return r;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::timeout, "updating " + noun + " " + key.substr(0, 8) + ": other writers kept changing it for " +
                                       std::to_string(timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (1 + attempt % 8)));
  }
}

}  // namespace troupe::gcs
