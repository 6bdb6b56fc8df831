#include "trainers/job/predict_spec.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "data/dataset_spec.h"

namespace troupe::job {
namespace {

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) return false;
  *out = v;
  return true;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
  return out;
}

}  // namespace

Status validate(const PredictJobSpec& s) {
  if (s.workers < 1 || s.workers > 4096)
    return invalid_argument("--workers must be in [1, 4096] for a prediction job (got " + std::to_string(s.workers) +
                            "; leave --workers out to predict in this process)");
  if (s.predict.batch_size < 1) return invalid_argument("--batch-size must be at least 1");
  if (s.shard_rows < 0 || s.shard_rows % s.predict.batch_size != 0)
    return invalid_argument("--shard-rows " + std::to_string(s.shard_rows) + " must be a multiple of --batch-size " +
                            std::to_string(s.predict.batch_size) + " (0: chosen from the rows)");
  if (s.cpus_per_worker < 0) return invalid_argument("--cpus-per-worker must be >= 0");
  for (const auto& [what, path] : {std::pair<const char*, const std::string&>{"--model", s.predict.model},
                                   {"--out", s.predict.out}, {"parts_dir", s.parts_dir}}) {
    if (path.empty() || path.front() != '/')
      return invalid_argument(std::string(what) + " '" + path + "' must be an absolute path in a prediction job's spec");
  }
  // A data spec: paths with commas, "text:" before a text file's (each absolute).
  if (s.predict.data.empty() || data::absolute_spec(s.predict.data) != s.predict.data)
    return invalid_argument("--data '" + s.predict.data + "' must name absolute paths in a prediction job's spec");
  if (s.max_restarts < 0 || s.max_restarts > 1000) return invalid_argument("--max-restarts must be in [0, 1000]");
  if (s.restart_backoff_ms < 0) return invalid_argument("--restart-backoff must be >= 0");
  if (s.restart_on != "any" && s.restart_on != "same" && s.restart_on != "other")
    return invalid_argument("--restart-on '" + s.restart_on + "' is not one of any, same, other");
  if (s.wait_timeout_ms < 1) return invalid_argument("wait_timeout_ms must be >= 1");
  return {};
}

int64_t shard_rows_for(const PredictJobSpec& spec, int64_t rows) {
  const int64_t batch = std::max<int64_t>(1, spec.predict.batch_size);
  if (spec.shard_rows > 0) return spec.shard_rows;
  const int64_t want = std::max<int64_t>(1, 8 * static_cast<int64_t>(spec.workers));  // shards
  const int64_t batches = (rows + batch - 1) / batch;
  return std::max<int64_t>(1, (batches + want - 1) / want) * batch;
}

int shard_count(int64_t rows, int64_t shard_rows) {
  return static_cast<int>((rows + shard_rows - 1) / std::max<int64_t>(1, shard_rows));
}

std::vector<std::string> to_settings(const PredictJobSpec& s) {
  const PredictOptions& p = s.predict;
  auto num = [](double v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
  };
  return {"strategy=" + std::string(kPredictStrategy), "name=" + s.name, "model=" + p.model, "data=" + p.data,
          "split=" + p.split, "inputs=" + join(p.inputs), "target=" + p.target, "token_dtype=" + p.token_dtype,
          "out=" + p.out, "batch_size=" + std::to_string(p.batch_size), "workers=" + std::to_string(s.workers),
          "cpus_per_worker=" + num(s.cpus_per_worker), "shard_rows=" + std::to_string(s.shard_rows),
          "parts_dir=" + s.parts_dir, "max_restarts=" + std::to_string(s.max_restarts),
          "restart_backoff_ms=" + std::to_string(s.restart_backoff_ms), "restart_on=" + s.restart_on,
          "wait_timeout_ms=" + std::to_string(s.wait_timeout_ms)};
}

Expected<PredictJobSpec> predict_spec_from_settings(const std::vector<std::string>& settings) {
  PredictJobSpec s;
  PredictOptions& p = s.predict;
  for (const std::string& item : settings) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return corrupt_data("prediction job setting '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq), v = item.substr(eq + 1);
    int64_t n = 0;
    bool ok = true;
    if (key == "strategy") ok = v == kPredictStrategy;
    else if (key == "name") s.name = v;
    else if (key == "model") p.model = v;
    else if (key == "data") p.data = v;
    else if (key == "split") p.split = v;
    else if (key == "target") p.target = v;
    else if (key == "token_dtype") p.token_dtype = v;
    else if (key == "out") p.out = v;
    else if (key == "parts_dir") s.parts_dir = v;
    else if (key == "restart_on") s.restart_on = v;
    else if (key == "inputs") {
      p.inputs.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) p.inputs.push_back(x);
    } else if (key == "cpus_per_worker") {
      char* end = nullptr;
      s.cpus_per_worker = std::strtod(v.c_str(), &end);
      ok = !v.empty() && *end == '\0';
    } else if (key == "batch_size" || key == "workers" || key == "shard_rows" || key == "max_restarts" ||
               key == "restart_backoff_ms" || key == "wait_timeout_ms") {
      ok = parse_int(v, &n);
      if (key == "batch_size") p.batch_size = n;
      else if (key == "workers") s.workers = static_cast<int>(n);
      else if (key == "shard_rows") s.shard_rows = n;
      else if (key == "max_restarts") s.max_restarts = static_cast<int>(n);
      else if (key == "restart_backoff_ms") s.restart_backoff_ms = n;
      else s.wait_timeout_ms = n;
    } else {
      return corrupt_data("prediction job setting '" + key + "' is not known to this troupe (submitted by a newer one?)");
    }
    if (!ok) return corrupt_data("prediction job setting '" + item + "': the value does not parse");
  }
  return s;
}

}  // namespace troupe::job
