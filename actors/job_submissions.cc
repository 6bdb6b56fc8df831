#include "actors/job_submissions.h"

#include <nlohmann/json.hpp>

namespace troupe::actors {
namespace {

constexpr const char* kTable = "job_submissions";
using Json = nlohmann::json;

Json to_json(const SubmitJob& s) {
  Json actors = Json::array();
  for (const JobActor& a : s.actors)
    actors.push_back({{"type", a.type_name}, {"name", a.name}, {"cpus", a.cpus}, {"gpus", a.gpus}, {"args", a.args}});
  return {{"job_id", s.job_id},
          {"policy", s.policy},
          {"actors", actors},
          {"max_restarts", s.max_restarts},
          {"restart_backoff_ms", s.restart_backoff_ms},
          {"restart_whole_gang", s.restart_whole_gang},
          {"restore_servers", s.restore_servers},
          {"elastic", s.elastic},
          {"restart_on", s.restart_on},
          {"live_recovery", s.live_recovery},
          {"progress_timeout_ms", s.progress_timeout_ms}};
}

SubmitJob from_json(const Json& j) {
  SubmitJob s;
  s.job_id = j.at("job_id").get<std::string>();
  s.policy = j.at("policy").get<std::string>();
  for (const Json& a : j.at("actors"))
    s.actors.push_back(JobActor{a.at("type").get<std::string>(), a.at("name").get<std::string>(),
                                a.at("cpus").get<double>(), a.at("gpus").get<double>(),
                                a.at("args").get<std::vector<std::string>>()});
  s.max_restarts = j.at("max_restarts").get<int32_t>();
  s.restart_backoff_ms = j.at("restart_backoff_ms").get<int64_t>();
  s.restart_whole_gang = j.at("restart_whole_gang").get<bool>();
  s.restore_servers = j.value("restore_servers", false);
  s.elastic = j.value("elastic", false);
  s.restart_on = j.value("restart_on", std::string("any"));
  s.live_recovery = j.value("live_recovery", false);
  s.progress_timeout_ms = j.at("progress_timeout_ms").get<int64_t>();
  return s;
}

}  // namespace

std::string submission_json(const SubmitJob& job) { return to_json(job).dump(); }

Expected<SubmitJob> submission_from_json(const std::string& text) {
  try {
    return from_json(Json::parse(text));
  } catch (const std::exception& e) {
    return invalid_argument(std::string("a job submission does not decode: ") + e.what());
  }
}

Status save_submission(gcs::Store& store, const SubmitJob& job) {
  return store.put(kTable, job.job_id, to_json(job).dump());
}

Expected<SubmitJob> load_submission(gcs::Store& store, const JobId& job) {
  auto raw = store.get(kTable, job.hex());
  if (!raw.ok()) return raw.status();
  if (!*raw) return not_found("job " + job.short_hex() + " has no submission record (submitted to no head)");
  try {
    return from_json(Json::parse(**raw));
  } catch (const std::exception& e) {
    return corrupt_data("the submission record of job " + job.short_hex() + " does not decode: " + e.what());
  }
}

}  // namespace troupe::actors
