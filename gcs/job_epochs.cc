#include "gcs/job_epochs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "gcs/events.h"

namespace troupe::gcs {
using Json = nlohmann::json;

Json epoch_result_json(const EpochResult& e) {
  return {{"epoch", e.epoch},           {"train_loss", e.train_loss}, {"train_accuracy", e.train_accuracy},
          {"test_accuracy", e.test_accuracy}, {"test_loss", e.test_loss}, {"seconds", e.seconds},
          {"time_ms", e.time_ms}};
}

// A value that is not finite (a diverged trial's NaN loss) is written as JSON null and read back as NaN.
double number(const Json& j, const char* key) {
  const Json& v = j.at(key);
  return v.is_null() ? std::numeric_limits<double>::quiet_NaN() : v.get<double>();
}

EpochResult epoch_result_from_json(const Json& j) {
  EpochResult e;
  e.epoch = j.at("epoch").get<int>();
  e.train_loss = number(j, "train_loss");
  e.train_accuracy = number(j, "train_accuracy");
  e.test_accuracy = number(j, "test_accuracy");
  e.test_loss = number(j, "test_loss");
  e.seconds = number(j, "seconds");
  e.time_ms = j.value("time_ms", int64_t{0});
  return e;
}

Expected<std::vector<EpochResult>> job_epochs(Store& store, const JobId& job) {
  auto raw = store.get(kJobEpochsTable, job.hex());
  if (!raw.ok()) return raw.status();
  std::vector<EpochResult> out;
  if (!*raw) return out;
  try {
    for (const Json& j : Json::parse(**raw)) out.push_back(epoch_result_from_json(j));
  } catch (const std::exception& e) {
    return corrupt_data("the epoch history of job " + job.short_hex() + " (" + kJobEpochsTable +
                        ") does not decode: " + e.what());
  }
  return out;
}

Status record_job_epoch(Store& store, const JobId& job, const EpochResult& e) {
  auto have = job_epochs(store, job);
  std::vector<EpochResult> epochs = have.ok() ? *have : std::vector<EpochResult>{};  // a bad history is replaced
  epochs.erase(std::remove_if(epochs.begin(), epochs.end(), [&](const EpochResult& x) { return x.epoch >= e.epoch; }),
               epochs.end());
  EpochResult line = e;
  if (line.time_ms == 0) line.time_ms = now_ms();
  epochs.push_back(line);
  Json arr = Json::array();
  for (const EpochResult& x : epochs) arr.push_back(epoch_result_json(x));
  TROUPE_RETURN_IF_ERROR(store.put(kJobEpochsTable, job.hex(), arr.dump()));
  return store.publish(kJobEpochsTable, job.hex());
}

bool epoch_metric(const EpochResult& e, const std::string& name, double* value) {
  double v = -1;
  if (name == "test_accuracy" || name == "val_accuracy") v = e.test_accuracy;
  else if (name == "test_loss" || name == "val_loss") v = e.test_loss;
  else if (name == "train_accuracy") v = e.train_accuracy;
  else if (name == "train_loss") v = e.train_loss;
  else return false;
  if (v < 0) return false;  // -1: not measured (NaN passes: a diverged trial reported it)
  *value = v;
  return true;
}

double rank_value(double v, const std::string& mode) {
  if (std::isfinite(v)) return v;
  return mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool known_epoch_metric(const std::string& name) {
  for (const char* m : {"test_accuracy", "val_accuracy", "test_loss", "val_loss", "train_loss", "train_accuracy"})
    if (name == m) return true;
  return false;
}

}  // namespace troupe::gcs
