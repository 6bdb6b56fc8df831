// Identifiers: 128 random bits, printed as 32 lowercase hex digits. Each kind of id is its own type
// (a JobId is never mistaken for a NodeId), and all share one implementation.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace troupe {

namespace detail {
std::array<uint8_t, 16> random_id_bytes();
std::string id_to_hex(const std::array<uint8_t, 16>& bytes);
bool id_from_hex(const std::string& hex, std::array<uint8_t, 16>* out);
}  // namespace detail

template <class Tag>
class Id {
 public:
  Id() { bytes_.fill(0); }  // the nil id
  static Id random() {
    Id id;
    id.bytes_ = detail::random_id_bytes();
    return id;
  }
  // Parses 32 hex digits; anything else is invalid_argument naming the text.
  static Expected<Id> from_hex(const std::string& hex) {
    Id id;
    if (!detail::id_from_hex(hex, &id.bytes_)) {
      return invalid_argument(std::string(Tag::name) + " id '" + hex + "' is not 32 hex digits");
    }
    return id;
  }
  static Id from_bytes(const std::array<uint8_t, 16>& bytes) {
    Id id;
    id.bytes_ = bytes;
    return id;
  }

  bool nil() const {
    for (uint8_t b : bytes_) if (b) return false;
    return true;
  }
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }
  std::string hex() const { return detail::id_to_hex(bytes_); }
  std::string short_hex() const { return hex().substr(0, 8); }  // for logs and tables

  bool operator==(const Id& o) const { return bytes_ == o.bytes_; }
  bool operator!=(const Id& o) const { return bytes_ != o.bytes_; }
  bool operator<(const Id& o) const { return bytes_ < o.bytes_; }

 private:
  std::array<uint8_t, 16> bytes_;
};

struct JobTag { static constexpr const char* name = "job"; };
struct NodeTag { static constexpr const char* name = "node"; };
struct ActorTag { static constexpr const char* name = "actor"; };
struct WorkerTag { static constexpr const char* name = "worker"; };
struct SearchTag { static constexpr const char* name = "search"; };

using JobId = Id<JobTag>;
using NodeId = Id<NodeTag>;
using ActorId = Id<ActorTag>;
using WorkerId = Id<WorkerTag>;
using SearchId = Id<SearchTag>;  // a hyperparameter search (gcs/search_record.h)

}  // namespace troupe

template <class Tag>
struct std::hash<troupe::Id<Tag>> {
  size_t operator()(const troupe::Id<Tag>& id) const {
    size_t h = 0;
    for (uint8_t b : id.bytes()) h = h * 131 + b;
    return h;
  }
};
