#include "collectives/group_rendezvous.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "collectives/group_transport.h"
#include "collectives/tcp_transport.h"
#include "gcs/events.h"
#include "gcs/records.h"
#include "gcs/tables.h"

namespace troupe::collectives {
namespace {

std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream os;
  if (d.count() % 1000 == 0)
    os << d.count() / 1000;
  else
    os << static_cast<double>(d.count()) / 1000.0;
  os << " s";
  return os.str();
}

std::string group_label(const std::string& name, int64_t generation) {
  return "group '" + name + "' generation " + std::to_string(generation);
}

std::string encode_member(const gcs::GroupMember& m) {
  return m.address + " " + m.node.hex() + " " + m.actor.hex();
}

Status decode_member(const std::string& key, const std::string& value, int rank, gcs::GroupMember* out) {
  std::istringstream is(value);
  std::string address, node, actor;
  if (!(is >> address >> node >> actor))
    return corrupt_data(std::string(kGroupMembersTable) + "/" + key + ": '" + value +
                        "' is not '<host:port> <node> <actor>'");
  auto n = NodeId::from_hex(node);
  if (!n) return n.status().with_context(std::string(kGroupMembersTable) + "/" + key);
  auto a = ActorId::from_hex(actor);
  if (!a) return a.status().with_context(std::string(kGroupMembersTable) + "/" + key);
  out->rank = rank;
  out->address = address;
  out->node = *n;
  out->actor = *a;
  return {};
}

Status validate(const GroupOptions& o) {
  if (o.name.empty() || o.name.find('/') != std::string::npos)
    return invalid_argument("group name '" + o.name + "' must be non-empty and contain no '/'");
  if (o.generation < 0) return invalid_argument(group_label(o.name, o.generation) + ": generation must be >= 0");
  if (o.world_size < 1)
    return invalid_argument(group_label(o.name, o.generation) + ": world size " + std::to_string(o.world_size) +
                            " must be >= 1");
  if (o.rank < 0 || o.rank >= o.world_size)
    return invalid_argument(group_label(o.name, o.generation) + ": rank " + std::to_string(o.rank) +
                            " is outside [0, " + std::to_string(o.world_size) + ")");
  if (o.timeout.count() <= 0) return invalid_argument(group_label(o.name, o.generation) + ": timeout must be > 0");
  return {};
}

// invalid_argument when a newer generation of the group is already recorded.
Status check_not_stale(gcs::Store& store, const std::string& name, int64_t generation) {
  auto existing = gcs::Table<gcs::GroupRecord>(store).get(name);
  if (existing.ok() && existing->generation > generation)
    return invalid_argument(group_label(name, generation) + " is stale: generation " +
                            std::to_string(existing->generation) + " is already recorded; re-form at generation " +
                            std::to_string(existing->generation + 1) + " or later");
  if (!existing.ok() && existing.status().code() != Code::not_found)
    return existing.status().with_context(group_label(name, generation));
  return {};
}

}  // namespace

Expected<int64_t> newest_generation(gcs::Store& store, const std::string& name) {
  return gcs::announced_generation(store, name);
}

std::string group_member_key(const std::string& name, int64_t generation, int rank) {
  return name + "/" + std::to_string(generation) + "/" + std::to_string(rank);
}

Expected<std::unique_ptr<Communicator>> form_group(gcs::Store& store, const GroupOptions& o) {
  TROUPE_RETURN_IF_ERROR(validate(o));
  const auto deadline = Clock::now() + o.timeout;
  const std::string label = group_label(o.name, o.generation);

  // 0. A generation older than the recorded one is stale for every rank, not only rank 0: without
  // this check the others would wait for members that re-formed long ago until their deadline.
  TROUPE_RETURN_IF_ERROR(check_not_stale(store, o.name, o.generation));

  // 1. Listen, then register under this rank's own key.
  auto listener = TcpListener::open(o.host, 0);
  if (!listener) return listener.status().with_context(label);
  gcs::GroupMember self;
  self.rank = o.rank;
  self.node = o.node;
  self.actor = o.actor;
  self.address = o.host + ":" + std::to_string(listener->port());
  const std::string own_key = group_member_key(o.name, o.generation, o.rank);
  auto stored = store.put_if_absent(kGroupMembersTable, own_key, encode_member(self));
  if (!stored) return stored.status().with_context(label + ": registering rank " + std::to_string(o.rank));
  if (!*stored)
    return invalid_argument(label + ": rank " + std::to_string(o.rank) + " is already registered (key " +
                            kGroupMembersTable + "/" + own_key + ")");
  TROUPE_RETURN_IF_ERROR(gcs::announce_generation(store, o.name, o.generation).with_context(label));

  // 2. Wait for every member of this generation.
  std::vector<std::optional<gcs::GroupMember>> members(o.world_size);
  members[o.rank] = self;
  auto pause = std::chrono::milliseconds(5);
  for (;;) {
    for (int r = 0; r < o.world_size; ++r) {
      if (members[r]) continue;
      const std::string key = group_member_key(o.name, o.generation, r);
      auto value = store.get(kGroupMembersTable, key);
      if (!value) return value.status().with_context(label + ": reading rank " + std::to_string(r));
      if (!value->has_value()) continue;
      gcs::GroupMember m;
      TROUPE_RETURN_IF_ERROR(decode_member(key, **value, r, &m));
      members[r] = m;
    }
    std::vector<int> missing;
    for (int r = 0; r < o.world_size; ++r)
      if (!members[r]) missing.push_back(r);
    if (missing.empty()) break;
    if (o.superseded_by) {  // members gone to a newer generation: go there too
      auto newest = newest_generation(store, o.name);
      if (newest.ok() && *newest > o.generation) {
        *o.superseded_by = *newest;
        (void)store.remove(kGroupMembersTable, own_key);
        return Status(Code::unavailable, label + " was superseded by generation " + std::to_string(*newest) +
                                             " while it waited for its members");
      }
    }
    if (Clock::now() >= deadline) {
      std::string list;
      for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
      return Status(Code::timeout, label + ": " + (missing.size() == 1 ? "rank " : "ranks ") + list + " did not " +
                                       "register within " + seconds_text(o.timeout));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::this_thread::sleep_for(std::max(std::chrono::milliseconds(1), std::min(pause, left)));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }

  // 3. Rank 0 records the group; everyone connects with the transport the members' nodes call for.
  if (o.rank == 0) {
    TROUPE_RETURN_IF_ERROR(check_not_stale(store, o.name, o.generation));
    gcs::Table<gcs::GroupRecord> groups(store);
    gcs::GroupRecord record;
    record.name = o.name;
    record.generation = o.generation;
    record.world_size = o.world_size;
    for (auto& m : members) record.members.push_back(*m);
    TROUPE_RETURN_IF_ERROR(groups.put(record));
  }
  std::vector<gcs::GroupMember> all;
  for (auto& m : members) all.push_back(*m);
  auto transport = connect_group_transport(o, all, std::move(*listener), deadline);
  if (!transport) return transport.status().with_context(label);
  if (o.rank == 0) gcs::remove_generations_before(store, o.name, o.generation);  // members and plans
  return std::make_unique<Communicator>(std::move(*transport));
}

Status record_group_failure(gcs::Store& store, const std::string& name, int64_t generation, const Status& error) {
  gcs::Event e;
  e.kind = "group_failed";
  e.subject = name;
  e.message = group_label(name, generation) + " failed: " + error.to_string();
  return gcs::record_event(store, std::move(e));
}

}  // namespace troupe::collectives
