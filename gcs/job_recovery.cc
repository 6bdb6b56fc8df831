#include "gcs/job_recovery.h"

#include <nlohmann/json.hpp>

namespace troupe::gcs {
namespace {

using Json = nlohmann::json;

std::string encode(const JobRecovery& r) {
  return Json{{"restarts", r.restarts}, {"attempt", r.attempt},       {"cause", r.cause},
              {"failed_ms", r.failed_ms}, {"detected_ms", r.detected_ms}, {"resumed_ms", r.resumed_ms}}
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

Status note_restart(Store& store, const JobId& job, int attempt, const std::string& cause, int64_t failed_ms,
                    int64_t detected_ms) {
  auto old = job_recovery(store, job);
  JobRecovery r;
  r.restarts = old.ok() && *old ? (*old)->restarts + 1 : 1;
  r.attempt = attempt;
  r.cause = cause;
  r.failed_ms = failed_ms;
  r.detected_ms = detected_ms;
  return store.put(kJobRecoveryTable, job.hex(), encode(r));
}

Status note_resumed_at(Store& store, const JobId& job, int attempt, int64_t resumed_ms) {
  auto old = job_recovery(store, job);
  if (!old.ok()) return old.status();
  if (!*old || (*old)->attempt != attempt || (*old)->resumed_ms != 0) return {};
  JobRecovery r = **old;
  r.resumed_ms = resumed_ms;
  return store.put(kJobRecoveryTable, job.hex(), encode(r));
}

}  // namespace troupe::gcs
