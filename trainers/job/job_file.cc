#include "trainers/job/job_file.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/durable_file.h"

namespace troupe::job {

std::string job_file_path(const std::string& job_dir) { return job_dir + "/" + kJobFileName; }

std::string encode_job_file(const JobFile& f) {
  nlohmann::ordered_json j;
  j["format"] = kJobFileFormat;
  j["job"] = f.job.hex();
  j["troupe_version"] = f.troupe_version;
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  for (const FieldSpec& x : f.data.fields)
    fields.push_back({{"name", x.name}, {"type", value_type_name(x.type)}, {"stored", value_type_name(x.stored)},
                      {"shape", x.shape}, {"target", x.target}});
  j["data"] = {{"features", f.data.features}, {"classes", f.data.classes}, {"target_width", f.data.target_width},
               {"fields", fields}};
  j["library"] = f.library;
  j["spec"] = f.spec;
  if (!f.normalization.empty()) j["normalization"] = f.normalization;
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

Status ensure_job_file(const std::string& job_dir, const JobFile& f) {
  const std::string path = job_file_path(job_dir);
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return {};
  std::filesystem::create_directories(job_dir, ec);
  if (ec) return io_error("cannot create the checkpoint directory " + job_dir + ": " + ec.message());
  return write_file_durably(path, encode_job_file(f), "job description");
}

Expected<JobFile> read_job_file(const std::string& job_dir) {
  const std::string path = job_file_path(job_dir);
  auto bytes = read_whole_file(path, "job description", 16u << 20);
  if (!bytes.ok()) return bytes.status();
  auto bad = [&](const std::string& what) { return corrupt_data("job description " + path + ": " + what); };
  nlohmann::json j = nlohmann::json::parse(*bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  try {
    if (j.at("format").get<int>() != kJobFileFormat)
      return bad("format " + j.at("format").dump() + "; this troupe reads format " + std::to_string(kJobFileFormat) +
                 " (a newer troupe wrote it: export with that one)");
    JobFile f;
    auto id = JobId::from_hex(j.at("job").get<std::string>());
    if (!id.ok()) return bad(id.status().message());
    f.job = *id;
    f.troupe_version = j.at("troupe_version").get<std::string>();
    f.data.features = j.at("data").at("features").get<int64_t>();
    f.data.classes = j.at("data").at("classes").get<int>();
    // (the schema since trainer ABI 5; absent in files of before: one class per example)
    f.data.target_width = j.at("data").value("target_width", int64_t{1});
    for (const auto& x : j.at("data").value("fields", nlohmann::json::array())) {
      FieldSpec s;
      s.name = x.at("name").get<std::string>();
      if (!parse_value_type(x.at("type").get<std::string>(), &s.type) ||
          !parse_value_type(x.at("stored").get<std::string>(), &s.stored))
        return bad("field " + x.dump() + ": an unknown value type");
      s.shape = x.at("shape").get<std::vector<int64_t>>();
      s.target = x.at("target").get<bool>();
      f.data.fields.push_back(std::move(s));
    }
    f.library = j.at("library").get<std::string>();
    f.spec = j.at("spec").get<std::vector<std::string>>();
    f.normalization = j.value("normalization", std::string());
    if (f.data.features < 1 || f.data.classes < 0 || f.data.target_width < 1) return bad("examples of " + j.at("data").dump() + " cannot be");
    return f;
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("a field is missing or of the wrong type (") + e.what() + ")");
  }
}

}  // namespace troupe::job
