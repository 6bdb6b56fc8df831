#include "gcs/job_recovery.h"

#include <functional>

#include <nlohmann/json.hpp>

namespace troupe::gcs {
namespace {

using Json = nlohmann::json;

std::string encode(const JobRecovery& r) {
  return Json{{"restarts", r.restarts}, {"attempt", r.attempt},       {"cause", r.cause},
              {"failed_ms", r.failed_ms}, {"detected_ms", r.detected_ms}, {"resumed_ms", r.resumed_ms},
              {"mode", r.mode},           {"failed_step", r.failed_step}, {"from_step", r.from_step},
              {"source_rank", r.source_rank}, {"bytes_moved", r.bytes_moved},
              {"pending_failed_step", r.pending_failed_step}}
      .dump();
}

}  // namespace

Expected<JobRecovery> decode_job_recovery(const std::string& bytes, const JobId& job) {
  try {
    const Json j = Json::parse(bytes);
    JobRecovery r;
    r.restarts = j.at("restarts").get<int>();
    r.attempt = j.at("attempt").get<int>();
    r.cause = j.at("cause").get<std::string>();
    r.failed_ms = j.at("failed_ms").get<int64_t>();
    r.detected_ms = j.at("detected_ms").get<int64_t>();
    r.resumed_ms = j.at("resumed_ms").get<int64_t>();
    // Added later (live recovery): absent from an older head's records.
    r.mode = j.value("mode", std::string());
    r.failed_step = j.value("failed_step", int64_t{-1});
    r.from_step = j.value("from_step", int64_t{-1});
    r.source_rank = j.value("source_rank", -1);
    r.bytes_moved = j.value("bytes_moved", int64_t{0});
    r.pending_failed_step = j.value("pending_failed_step", int64_t{-1});
    return r;
  } catch (const std::exception& e) {
    return corrupt_data("the recovery record of job " + job.short_hex() + " does not decode: " + e.what());
  }
}

Expected<std::optional<JobRecovery>> job_recovery(Store& store, const JobId& job) {
  auto raw = store.get(kJobRecoveryTable, job.hex());
  if (!raw.ok()) return raw.status();
  if (!*raw) return std::optional<JobRecovery>();
  auto r = decode_job_recovery(**raw, job);
  if (!r.ok()) return r.status();
  return std::optional<JobRecovery>(*r);
}

namespace {

// Applies `change` to the job's record (absent: nullopt) and writes the result atomically — the
// head's supervisor and the job's workers write the same record, a read-modify-write each, so a
// plain put could undo another's (a worker's failed step erasing the supervisor's restart) —
// retrying from a fresh read when another writer came between. `change` returns false to write
// nothing.
Status update(Store& store, const JobId& job, const std::function<bool(std::optional<JobRecovery>&)>& change) {
  for (int tries = 0; tries < 1000; ++tries) {
    auto raw = store.get(kJobRecoveryTable, job.hex());
    if (!raw.ok()) return raw.status();
    std::optional<JobRecovery> r;
    if (*raw) {
      auto decoded = decode_job_recovery(**raw, job);
      if (!decoded.ok()) return decoded.status();
      r = *decoded;
    }
    if (!change(r) || !r) return {};
    const std::string bytes = encode(*r);
    auto done = *raw ? store.compare_and_set(kJobRecoveryTable, job.hex(), **raw, bytes)
                     : store.put_if_absent(kJobRecoveryTable, job.hex(), bytes);
    if (!done.ok()) return done.status();
    if (*done) return {};
  }
  return unavailable("the recovery record of job " + job.short_hex() + " changed under 1000 tries to update it");
}

}  // namespace

Status note_restart(Store& store, const JobId& job, int attempt, const std::string& cause, int64_t failed_ms,
                    int64_t detected_ms, int64_t failed_step) {
  return update(store, job, [&](std::optional<JobRecovery>& old) {
    JobRecovery r;
    r.restarts = old ? old->restarts + 1 : 1;
    r.attempt = attempt;
    r.cause = cause;
    r.failed_ms = failed_ms;
    r.detected_ms = detected_ms;
    r.failed_step = old ? std::max(failed_step, old->pending_failed_step) : failed_step;
    old = r;
    return true;
  });
}

Status note_resumed_at(Store& store, const JobId& job, int attempt, int64_t resumed_ms, int64_t from_step) {
  return update(store, job, [&](std::optional<JobRecovery>& r) {
    if (!r || r->attempt != attempt || r->resumed_ms != 0) return false;
    r->resumed_ms = resumed_ms;
    if (from_step >= 0) r->from_step = from_step;
    if (r->mode.empty()) r->mode = "checkpoint";
    return true;
  });
}

Status note_failed_step(Store& store, const JobId& job, int64_t steps) {
  return update(store, job, [&](std::optional<JobRecovery>& r) {
    if (!r || r->resumed_ms != 0) {  // the supervisor has not begun this restart yet
      if (!r) r = JobRecovery{};
      if (r->pending_failed_step >= steps) return false;
      r->pending_failed_step = steps;
    } else {
      if (r->failed_step >= steps) return false;
      r->failed_step = steps;
    }
    return true;
  });
}

Status note_recovery_mode(Store& store, const JobId& job, int attempt, const std::string& mode, int64_t from_step,
                          int source_rank, int64_t bytes) {
  return update(store, job, [&](std::optional<JobRecovery>& r) {
    if (!r || r->attempt != attempt) return false;
    r->mode = mode;
    r->from_step = from_step;
    r->source_rank = source_rank;
    r->bytes_moved = bytes;
    return true;
  });
}

}  // namespace troupe::gcs
