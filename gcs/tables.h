// Typed tables over a Store: one template serves every record type of gcs/records.h. Writes also
// publish "<table>" notifications (message: the key) so watchers learn of changes without polling.
#pragma once

#include <string>
#include <vector>

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

 private:
  Store& store_;
};

}  // namespace troupe::gcs
