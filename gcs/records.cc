// msgpack encoding of the GCS records: each record is the array [kRecordSchemaVersion, field, ...]
// with its fields in declaration order; nested structs (Resources, GpuInfo, GroupMember,
// CheckpointShard) are arrays of their fields; ids are 16-byte bins (core/codec.h); enums are
// unsigned integers. Decoding builds a fresh record and assigns it only when every field decoded,
// so on error the output is unchanged.
#include "gcs/records.h"

#include "gcs/record_fields.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the helpers of this file

// ---- state names ----

const char* node_state_name(NodeState s) {
  switch (s) {
    case NodeState::alive: return "ALIVE";
    case NodeState::suspect: return "SUSPECT";
    case NodeState::dead: return "DEAD";
  }
  return "UNKNOWN";
}

const char* actor_state_name(ActorState s) {
  switch (s) {
    case ActorState::pending: return "PENDING";
    case ActorState::alive: return "ALIVE";
    case ActorState::restarting: return "RESTARTING";
    case ActorState::dead: return "DEAD";
    case ActorState::finished: return "FINISHED";
  }
  return "UNKNOWN";
}

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::pending: return "PENDING";
    case JobState::running: return "RUNNING";
    case JobState::succeeded: return "SUCCEEDED";
    case JobState::failed: return "FAILED";
    case JobState::cancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

const char* shard_state_name(ShardState s) {
  switch (s) {
    case ShardState::unassigned: return "UNASSIGNED";
    case ShardState::assigned: return "ASSIGNED";
    case ShardState::done: return "DONE";
  }
  return "UNKNOWN";
}

// ---- nodes ----

std::string encode(const NodeRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 13);
    pack_id(pk, r.id);
    put_str(pk, r.address);
    put_str(pk, r.hostname);
    pk.pack_int64(r.pid);
    if (r.is_head) pk.pack_true(); else pk.pack_false();
    put_str(pk, r.version);
    put_resources(pk, r.total);
    put_resources(pk, r.used);
    pk.pack_array(static_cast<uint32_t>(r.gpus.size()));
    for (const GpuInfo& g : r.gpus) {
      pk.pack_array(3);
      pk.pack_int64(g.index);
      put_str(pk, g.name);
      pk.pack_int64(g.memory_bytes);
    }
    pk.pack_uint8(static_cast<uint8_t>(r.state));
    pk.pack_int64(r.started_ms);
    pk.pack_int64(r.last_heartbeat_ms);
    put_str(pk, r.death_reason);
  });
}

Status decode(const std::string& bytes, NodeRecord* out) {
  return read_record(bytes, "node", 13, out, [](Fields& f, NodeRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("id", &r.id));
    TROUPE_RETURN_IF_ERROR(f.str("address", &r.address));
    TROUPE_RETURN_IF_ERROR(f.str("hostname", &r.hostname));
    TROUPE_RETURN_IF_ERROR(f.i32("pid", &r.pid));
    TROUPE_RETURN_IF_ERROR(f.boolean("is_head", &r.is_head));
    TROUPE_RETURN_IF_ERROR(f.str("version", &r.version));
    TROUPE_RETURN_IF_ERROR(f.resources("total", &r.total));
    TROUPE_RETURN_IF_ERROR(f.resources("used", &r.used));
    TROUPE_RETURN_IF_ERROR(f.list("gpus", 3, &r.gpus, [](Fields& g, GpuInfo* out) -> Status {
      TROUPE_RETURN_IF_ERROR(g.i32("index", &out->index));
      TROUPE_RETURN_IF_ERROR(g.str("name", &out->name));
      return g.i64("memory_bytes", &out->memory_bytes);
    }));
    TROUPE_RETURN_IF_ERROR(f.enumeration("state", 2, &r.state));
    TROUPE_RETURN_IF_ERROR(f.i64("started_ms", &r.started_ms));
    TROUPE_RETURN_IF_ERROR(f.i64("last_heartbeat_ms", &r.last_heartbeat_ms));
    return f.str("death_reason", &r.death_reason);
  });
}

// ---- actors ----

std::string encode(const ActorRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 12);
    pack_id(pk, r.id);
    put_str(pk, r.type_name);
    put_str(pk, r.name);
    pack_id(pk, r.job);
    pack_id(pk, r.node);
    pk.pack_uint8(static_cast<uint8_t>(r.state));
    pk.pack_int64(r.restarts);
    put_resources(pk, r.resources);
    put_str(pk, r.pending_reason);
    put_str(pk, r.death_reason);
    pk.pack_int64(r.updated_ms);
    pk.pack_array(static_cast<uint32_t>(r.gpu_ids.size()));
    for (int g : r.gpu_ids) pk.pack_int64(g);
  });
}

Status decode(const std::string& bytes, ActorRecord* out) {
  return read_record(bytes, "actor", 12, out, [](Fields& f, ActorRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("id", &r.id));
    TROUPE_RETURN_IF_ERROR(f.str("type_name", &r.type_name));
    TROUPE_RETURN_IF_ERROR(f.str("name", &r.name));
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.id("node", &r.node));
    TROUPE_RETURN_IF_ERROR(f.enumeration("state", 4, &r.state));
    TROUPE_RETURN_IF_ERROR(f.i32("restarts", &r.restarts));
    TROUPE_RETURN_IF_ERROR(f.resources("resources", &r.resources));
    TROUPE_RETURN_IF_ERROR(f.str("pending_reason", &r.pending_reason));
    TROUPE_RETURN_IF_ERROR(f.str("death_reason", &r.death_reason));
    TROUPE_RETURN_IF_ERROR(f.i64("updated_ms", &r.updated_ms));
    return f.ints("gpu_ids", &r.gpu_ids);
  });
}

// ---- jobs ----

std::string encode(const JobRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 22);
    pack_id(pk, r.id);
    put_str(pk, r.name);
    put_str(pk, r.strategy);
    pk.pack_uint8(static_cast<uint8_t>(r.state));
    pk.pack_int64(r.workers);
    pk.pack_int64(r.submitted_ms);
    pk.pack_int64(r.finished_ms);
    pk.pack_double(r.progress);
    put_str(pk, r.message);
    pk.pack_int64(r.ps);
    put_strings(pk, r.spec);
    put_strings(pk, r.actors);
    pk.pack_int64(r.epoch);
    pk.pack_int64(r.epochs);
    pk.pack_int64(r.step);
    pk.pack_int64(r.steps);
    pk.pack_double(r.loss);
    pk.pack_double(r.samples_per_second);
    pk.pack_double(r.eta_seconds);
    pk.pack_double(r.test_accuracy);
    put_str(pk, r.result);
    pk.pack_int64(r.updated_ms);
  });
}

Status decode(const std::string& bytes, JobRecord* out) {
  return read_record(bytes, "job", 22, out, [](Fields& f, JobRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("id", &r.id));
    TROUPE_RETURN_IF_ERROR(f.str("name", &r.name));
    TROUPE_RETURN_IF_ERROR(f.str("strategy", &r.strategy));
    TROUPE_RETURN_IF_ERROR(f.enumeration("state", 4, &r.state));
    TROUPE_RETURN_IF_ERROR(f.i32("workers", &r.workers));
    TROUPE_RETURN_IF_ERROR(f.i64("submitted_ms", &r.submitted_ms));
    TROUPE_RETURN_IF_ERROR(f.i64("finished_ms", &r.finished_ms));
    TROUPE_RETURN_IF_ERROR(f.f64("progress", &r.progress));
    TROUPE_RETURN_IF_ERROR(f.str("message", &r.message));
    TROUPE_RETURN_IF_ERROR(f.i32("ps", &r.ps));
    TROUPE_RETURN_IF_ERROR(f.strings("spec", &r.spec));
    TROUPE_RETURN_IF_ERROR(f.strings("actors", &r.actors));
    TROUPE_RETURN_IF_ERROR(f.i32("epoch", &r.epoch));
    TROUPE_RETURN_IF_ERROR(f.i32("epochs", &r.epochs));
    TROUPE_RETURN_IF_ERROR(f.i64("step", &r.step));
    TROUPE_RETURN_IF_ERROR(f.i64("steps", &r.steps));
    TROUPE_RETURN_IF_ERROR(f.f64("loss", &r.loss));
    TROUPE_RETURN_IF_ERROR(f.f64("samples_per_second", &r.samples_per_second));
    TROUPE_RETURN_IF_ERROR(f.f64("eta_seconds", &r.eta_seconds));
    TROUPE_RETURN_IF_ERROR(f.f64("test_accuracy", &r.test_accuracy));
    TROUPE_RETURN_IF_ERROR(f.str("result", &r.result));
    return f.i64("updated_ms", &r.updated_ms);
  });
}

// ---- groups ----

std::string encode(const GroupRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 5);
    put_str(pk, r.name);
    pk.pack_int64(r.generation);
    pk.pack_int64(r.world_size);
    pk.pack_array(static_cast<uint32_t>(r.members.size()));
    for (const GroupMember& m : r.members) {
      pk.pack_array(4);
      pk.pack_int64(m.rank);
      pack_id(pk, m.node);
      pack_id(pk, m.actor);
      put_str(pk, m.address);
    }
    put_bin(pk, r.nccl_id);
  });
}

Status decode(const std::string& bytes, GroupRecord* out) {
  return read_record(bytes, "group", 5, out, [](Fields& f, GroupRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.str("name", &r.name));
    TROUPE_RETURN_IF_ERROR(f.i64("generation", &r.generation));
    TROUPE_RETURN_IF_ERROR(f.i32("world_size", &r.world_size));
    TROUPE_RETURN_IF_ERROR(f.list("members", 4, &r.members, [](Fields& m, GroupMember* out) -> Status {
      TROUPE_RETURN_IF_ERROR(m.i32("rank", &out->rank));
      TROUPE_RETURN_IF_ERROR(m.id("node", &out->node));
      TROUPE_RETURN_IF_ERROR(m.id("actor", &out->actor));
      return m.str("address", &out->address);
    }));
    return f.bin("nccl_id", &r.nccl_id);
  });
}

// ---- shards ----

std::string encode(const ShardRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 10);
    pack_id(pk, r.job);
    pk.pack_int64(r.epoch);
    pk.pack_int64(r.shard);
    pk.pack_uint8(static_cast<uint8_t>(r.state));
    pack_id(pk, r.owner);
    pk.pack_int64(r.examples);
    pk.pack_int64(r.progress);
    pk.pack_int64(r.claims);
    pk.pack_int64(r.updated_ms);
    pk.pack_int64(r.resume_at);
  });
}

Status decode(const std::string& bytes, ShardRecord* out) {
  return read_record(bytes, "shard", 10, out, [](Fields& f, ShardRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.i32("epoch", &r.epoch));
    TROUPE_RETURN_IF_ERROR(f.i32("shard", &r.shard));
    TROUPE_RETURN_IF_ERROR(f.enumeration("state", 2, &r.state));
    TROUPE_RETURN_IF_ERROR(f.id("owner", &r.owner));
    TROUPE_RETURN_IF_ERROR(f.i64("examples", &r.examples));
    TROUPE_RETURN_IF_ERROR(f.i64("progress", &r.progress));
    TROUPE_RETURN_IF_ERROR(f.i32("claims", &r.claims));
    TROUPE_RETURN_IF_ERROR(f.i64("updated_ms", &r.updated_ms));
    return f.i64("resume_at", &r.resume_at);
  });
}

// ---- checkpoints ----

std::string encode(const CheckpointRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 5);
    pack_id(pk, r.job);
    pk.pack_int64(r.step);
    put_str(pk, r.dir);
    pk.pack_array(static_cast<uint32_t>(r.shards.size()));
    for (const CheckpointShard& s : r.shards) {
      pk.pack_array(3);
      put_str(pk, s.path);
      pk.pack_uint64(s.bytes);
      put_str(pk, s.checksum);
    }
    pk.pack_int64(r.written_ms);
  });
}

Status decode(const std::string& bytes, CheckpointRecord* out) {
  return read_record(bytes, "checkpoint", 5, out, [](Fields& f, CheckpointRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.id("job", &r.job));
    TROUPE_RETURN_IF_ERROR(f.i64("step", &r.step));
    TROUPE_RETURN_IF_ERROR(f.str("dir", &r.dir));
    TROUPE_RETURN_IF_ERROR(f.list("shards", 3, &r.shards, [](Fields& s, CheckpointShard* out) -> Status {
      TROUPE_RETURN_IF_ERROR(s.str("path", &out->path));
      TROUPE_RETURN_IF_ERROR(s.u64("bytes", &out->bytes));
      return s.str("checksum", &out->checksum);
    }));
    return f.i64("written_ms", &r.written_ms);
  });
}

std::string encode(const TrainerLibraryRecord& r) {
  return write([&](Packer& pk) {
    begin(pk, 7);
    put_str(pk, r.checksum);
    put_str(pk, r.file_name);
    put_str(pk, r.troupe_version);
    pk.pack_int32(r.abi);
    pk.pack_uint64(r.size);
    put_strings(pk, r.trainers);
    pk.pack_int64(r.stored_ms);
  });
}

Status decode(const std::string& bytes, TrainerLibraryRecord* out) {
  return read_record(bytes, "trainer library", 7, out, [](Fields& f, TrainerLibraryRecord& r) -> Status {
    TROUPE_RETURN_IF_ERROR(f.str("checksum", &r.checksum));
    TROUPE_RETURN_IF_ERROR(f.str("file_name", &r.file_name));
    TROUPE_RETURN_IF_ERROR(f.str("troupe_version", &r.troupe_version));
    TROUPE_RETURN_IF_ERROR(f.i32("abi", &r.abi));
    TROUPE_RETURN_IF_ERROR(f.u64("size", &r.size));
    TROUPE_RETURN_IF_ERROR(f.strings("trainers", &r.trainers));
    return f.i64("stored_ms", &r.stored_ms);
  });
}

// ---- keys ----

std::string record_key(const NodeRecord& r) { return r.id.hex(); }
std::string record_key(const ActorRecord& r) { return r.id.hex(); }
std::string record_key(const JobRecord& r) { return r.id.hex(); }
std::string record_key(const GroupRecord& r) { return r.name; }
std::string record_key(const ShardRecord& r) {
  return r.job.hex() + "/" + std::to_string(r.epoch) + "/" + std::to_string(r.shard);
}
std::string record_key(const CheckpointRecord& r) { return r.job.hex() + "/" + std::to_string(r.step); }
std::string record_key(const TrainerLibraryRecord& r) { return r.checksum; }

}  // namespace troupe::gcs
