// Step timelines as msgpack records:
//   steps  [kRecordSchemaVersion, [[epoch, step, start_us, data_us, compute_us, comm_us, optimizer_us,
//           comm_busy_us, samples, loss], ...]]
//   loss   [kRecordSchemaVersion, step, loss, time_ms]
//   live   [kRecordSchemaVersion, rank, phase, phase_since_ms, epoch, step, updated_ms]
#include "gcs/step_timeline.h"

#include <algorithm>

#include "gcs/record_fields.h"

namespace troupe::gcs {
using namespace record_detail;  // NOLINT: the helpers of this file

std::string timeline_stream(const std::string& job_hex, int rank) {
  return "timeline/" + job_hex + "/" + std::to_string(rank);
}

std::string encode_steps(const std::vector<StepSample>& steps) {
  return write([&](Packer& pk) {
    begin(pk, 1);
    pk.pack_array(static_cast<uint32_t>(steps.size()));
    for (const StepSample& s : steps) {
      pk.pack_array(11);
      pk.pack_int64(s.epoch);
      pk.pack_int64(s.step);
      pk.pack_int64(s.start_us);
      pk.pack_int64(s.data_us);
      pk.pack_int64(s.compute_us);
      pk.pack_int64(s.comm_us);
      pk.pack_int64(s.optimizer_us);
      pk.pack_int64(s.comm_busy_us);
      pk.pack_int64(s.samples);
      pk.pack_double(s.loss);
      pk.pack_int64(s.comm_bytes);
    }
  });
}

Status decode_steps(const std::string& bytes, std::vector<StepSample>* out) {
  return read_record(bytes, "step timeline", 1, out, [](Fields& f, std::vector<StepSample>& v) -> Status {
    return f.list("steps", 11, &v, [](Fields& s, StepSample* o) -> Status {
      TROUPE_RETURN_IF_ERROR(s.i32("epoch", &o->epoch));
      TROUPE_RETURN_IF_ERROR(s.i64("step", &o->step));
      TROUPE_RETURN_IF_ERROR(s.i64("start_us", &o->start_us));
      TROUPE_RETURN_IF_ERROR(s.i64("data_us", &o->data_us));
      TROUPE_RETURN_IF_ERROR(s.i64("compute_us", &o->compute_us));
      TROUPE_RETURN_IF_ERROR(s.i64("comm_us", &o->comm_us));
      TROUPE_RETURN_IF_ERROR(s.i64("optimizer_us", &o->optimizer_us));
      TROUPE_RETURN_IF_ERROR(s.i64("comm_busy_us", &o->comm_busy_us));
      TROUPE_RETURN_IF_ERROR(s.i64("samples", &o->samples));
      TROUPE_RETURN_IF_ERROR(s.f64("loss", &o->loss));
      return s.i64("comm_bytes", &o->comm_bytes);
    });
  });
}

std::string encode_live(const WorkerLive& w) {
  return write([&](Packer& pk) {
    begin(pk, 6);
    pk.pack_int64(w.rank);
    put_str(pk, w.phase);
    pk.pack_int64(w.phase_since_ms);
    pk.pack_int64(w.epoch);
    pk.pack_int64(w.step);
    pk.pack_int64(w.updated_ms);
  });
}

Status decode_live(const std::string& bytes, WorkerLive* out) {
  return read_record(bytes, "worker live", 6, out, [](Fields& f, WorkerLive& w) -> Status {
    TROUPE_RETURN_IF_ERROR(f.i32("rank", &w.rank));
    TROUPE_RETURN_IF_ERROR(f.str("phase", &w.phase));
    TROUPE_RETURN_IF_ERROR(f.i64("phase_since_ms", &w.phase_since_ms));
    TROUPE_RETURN_IF_ERROR(f.i32("epoch", &w.epoch));
    TROUPE_RETURN_IF_ERROR(f.i64("step", &w.step));
    return f.i64("updated_ms", &w.updated_ms);
  });
}

Status append_steps(Store& store, const std::string& job_hex, int rank, const std::vector<StepSample>& steps) {
  const std::string stream = timeline_stream(job_hex, rank);
  for (size_t i = 0; i < steps.size(); i += kTimelineChunkSteps) {
    const size_t end = std::min(steps.size(), i + kTimelineChunkSteps);
    const std::vector<StepSample> chunk(steps.begin() + static_cast<std::ptrdiff_t>(i),
                                        steps.begin() + static_cast<std::ptrdiff_t>(end));
    auto id = store.append(stream, encode_steps(chunk), kTimelineChunks);
    if (!id.ok()) return id.status().with_context("recording the step timeline of rank " + std::to_string(rank));
  }
  return {};
}

Expected<std::vector<StepSample>> read_steps(Store& store, const std::string& job_hex, int rank, size_t max_steps) {
  max_steps = std::min(max_steps, kTimelineMaxSteps);
  const std::string stream = timeline_stream(job_hex, rank);
  // The newest entries first in small reads, more only while they hold too few steps: a page that
  // wants 400 steps reads a few entries, not the whole stream.
  for (size_t entries = 4;; entries = std::min(entries * 4, kTimelineChunks)) {
    auto read = store.read_recent(stream, entries);
    if (!read.ok()) return read.status();
    std::vector<StepSample> out;
    for (const StreamEntry& e : *read) {
      std::vector<StepSample> chunk;
      Status st = decode_steps(e.value, &chunk);
      if (!st.ok()) return st.with_context(stream + " entry " + e.id);
      out.insert(out.end(), chunk.begin(), chunk.end());
    }
    if (out.size() >= max_steps || read->size() < entries || entries == kTimelineChunks) {
      if (out.size() > max_steps) out.erase(out.begin(), out.end() - static_cast<std::ptrdiff_t>(max_steps));
      return out;
    }
  }
}

std::string loss_curve_stream(const std::string& job_hex) { return "timeline/" + job_hex + "/loss"; }

Status append_loss_point(Store& store, const std::string& job_hex, const LossPoint& p) {
  const std::string bytes = write([&](Packer& pk) {
    begin(pk, 3);
    pk.pack_int64(p.step);
    pk.pack_double(p.loss);
    pk.pack_int64(p.time_ms);
  });
  auto id = store.append(loss_curve_stream(job_hex), bytes, kLossCurvePoints);
  return id.ok() ? Status() : id.status().with_context("recording the loss curve");
}

Expected<std::vector<LossPoint>> read_loss_curve(Store& store, const std::string& job_hex, size_t max_points) {
  const std::string stream = loss_curve_stream(job_hex);
  auto entries = store.read_recent(stream, std::min(max_points, kLossCurvePoints));
  if (!entries.ok()) return entries.status();
  std::vector<LossPoint> out;
  out.reserve(entries->size());
  for (const StreamEntry& e : *entries) {
    LossPoint p;
    Status st = read_record(e.value, "loss point", 3, &p, [](Fields& f, LossPoint& r) -> Status {
      TROUPE_RETURN_IF_ERROR(f.i64("step", &r.step));
      TROUPE_RETURN_IF_ERROR(f.f64("loss", &r.loss));
      return f.i64("time_ms", &r.time_ms);
    });
    if (!st.ok()) return st.with_context(stream + " entry " + e.id);
    out.push_back(p);
  }
  return out;
}

Status put_live(Store& store, const std::string& job_hex, const WorkerLive& w) {
  return store.put(kTimelineLiveTable, job_hex + "/" + std::to_string(w.rank), encode_live(w));
}

Expected<std::optional<WorkerLive>> read_live(Store& store, const std::string& job_hex, int rank) {
  const std::string key = job_hex + "/" + std::to_string(rank);
  auto bytes = store.get(kTimelineLiveTable, key);
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<WorkerLive>();
  WorkerLive w;
  Status st = decode_live(**bytes, &w);
  if (!st.ok()) return st.with_context(std::string(kTimelineLiveTable) + "/" + key);
  return std::optional<WorkerLive>(w);
}

}  // namespace troupe::gcs
