#include "trainers/export/checkpoint_source.h"

#include <algorithm>
#include <filesystem>

#include "gcs/checkpoint_mirror.h"
#include "gcs/tables.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_file.h"

namespace troupe::exporting {
namespace {

namespace fs = std::filesystem;

// The step of a directory named step-<digits>, or -1.
int64_t step_of(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return -1;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return -1;
  return std::stoll(name.substr(5));
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// The step-* directories directly under `dir`, and whether it could be read.
Expected<std::vector<fs::path>> step_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code dir_ec;
    if (step_of(it->path()) >= 0 && it->is_directory(dir_ec)) out.push_back(it->path());
  }
  if (ec) return io_error("cannot read the directory " + dir.string() + ": " + ec.message());
  return out;
}

// The subdirectories of `dir` that look like job checkpoint directories (a JOB.json or step-*).
std::vector<std::string> job_dirs_under(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec)) continue;
    auto steps = step_dirs(it->path());
    if (is_file(it->path() / job::kJobFileName) || (steps.ok() && !steps->empty()))
      out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The entry of step directory `dir` from its mirror, the shard paths rebased onto `dir`.
CheckpointEntry entry_from_mirror(const fs::path& dir, const JobId& job) {
  CheckpointEntry e;
  e.step = step_of(dir);
  e.manifest.tag = job.hex();
  e.manifest.step = e.step;
  e.manifest.dir = dir.string();
  const std::string path = gcs::mirror_path(dir.string());
  auto mirror = gcs::read_checkpoint_mirror(path);
  if (!mirror.ok()) {
    e.problem = mirror.status().code() == Code::not_found
                    ? dir.string() + " has no " + gcs::kMirrorFileName + " (its checkpoint was never committed)"
                    : mirror.status().message();
    return e;
  }
  const gcs::CheckpointRecord& r = mirror->manifest;
  if (r.job != job) {
    e.problem = "checkpoint manifest " + path + " is job " + r.job.short_hex() + "'s, not " + job.short_hex() + "'s";
    return e;
  }
  if (r.step != e.step) {
    e.problem = "checkpoint manifest " + path + " is the one of step " + std::to_string(r.step) + ", in the directory of step " +
                std::to_string(e.step);
    return e;
  }
  for (const gcs::CheckpointShard& s : r.shards)
    e.manifest.shards.push_back(
        checkpoint::WrittenShard{(dir / fs::path(s.path).filename()).string(), s.bytes, s.checksum});
  if (e.manifest.shards.empty()) e.problem = "checkpoint manifest " + path + " lists no shards";
  return e;
}

// The spec and data shape of the job whose checkpoints are under `job_dir`.
Status read_description(const std::string& job_dir, CheckpointSource* src, std::vector<std::string>* settings) {
  std::error_code ec;
  if (!fs::is_directory(job_dir, ec))
    return not_found("the job's checkpoint directory " + job_dir + " is not on this machine: export where it is "
                     "(the nodes' file system), or copy it here and give the directory");
  auto f = job::read_job_file(job_dir);
  if (!f.ok()) {
    if (f.status().code() == Code::not_found)
      return not_found("no " + std::string(job::kJobFileName) + " in " + job_dir +
                       ": the checkpoints there were written before troupe described its jobs beside them, and "
                       "without it the trainer's parameter layout is unknown; train again with this troupe to "
                       "export");
    return f.status();
  }
  src->job = f->job;
  src->data = f->data;
  src->normalization = f->normalization;
  src->library_file = f->library;
  if (settings) *settings = f->spec;
  return {};
}

}  // namespace

Expected<CheckpointSource> source_from_gcs(gcs::Store& store, const JobId& job) {
  CheckpointSource src;
  src.where = "job " + job.short_hex();
  auto record = gcs::Table<gcs::JobRecord>(store).get(job.hex());
  if (!record.ok()) return record.status().with_context(src.where);
  auto spec = job::from_settings(record->spec);
  if (!spec.ok()) return spec.status().with_context(src.where + "'s settings");
  src.spec = std::move(*spec);
  if (src.spec.checkpoint_every <= 0 || src.spec.checkpoint_dir.empty())
    return invalid_argument(src.where + " wrote no checkpoints (it was submitted without --checkpoint-every); "
                            "a job's final model comes out with `troupe submit --save PATH`");
  src.job_dir = job::checkpoint_dir(src.spec, job);
  TROUPE_RETURN_IF_ERROR(read_description(src.job_dir, &src, nullptr).with_context(src.where));
  if (src.job != job)
    return corrupt_data(job::job_file_path(src.job_dir) + " describes job " + src.job.short_hex() + ", not " +
                        job.short_hex());
  auto records = checkpoint::list_checkpoints(store, job);
  if (!records.ok()) return records.status().with_context(src.where + "'s checkpoints");
  for (const gcs::CheckpointRecord& r : *records) {
    CheckpointEntry e;
    e.step = r.step;
    e.manifest = checkpoint::from_record(r);
    if (e.manifest.shards.empty()) e.problem = "its manifest lists no shards";
    src.checkpoints.push_back(std::move(e));
  }
  return src;
}

Expected<CheckpointSource> source_from_directory(const std::string& given) {
  std::error_code ec;
  if (!fs::exists(given, ec))
    return not_found("checkpoint directory " + given + " does not exist");
  if (!fs::is_directory(given, ec)) return invalid_argument(given + " is a file, not a checkpoint directory");
  CheckpointSource src;
  src.where = given;
  fs::path dir = fs::absolute(given, ec).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // a trailing '/'
  const int64_t step = step_of(dir);
  if (step >= 0 || is_file(dir / gcs::kMirrorFileName)) {  // one step directory
    if (step < 0)
      return invalid_argument(given + " holds a " + std::string(gcs::kMirrorFileName) +
                              " but is not named step-<step>: give its job's directory");
    src.only_step = step;
    src.job_dir = dir.parent_path().string();
  } else {
    src.job_dir = dir.string();
  }
  auto steps = step_dirs(src.job_dir);
  if (!steps.ok()) return steps.status();
  if (steps->empty() && !is_file(fs::path(src.job_dir) / job::kJobFileName)) {
    const std::vector<std::string> jobs = job_dirs_under(src.job_dir);
    if (!jobs.empty()) {
      std::string list;
      for (size_t i = 0; i < jobs.size() && i < 8; ++i) list += (i ? ", " : "") + (dir / jobs[i]).string();
      return invalid_argument(given + " is a --checkpoint-dir of " + std::to_string(jobs.size()) +
                              " job(s): give one job's directory: " + list);
    }
    return invalid_argument(given + " is not a checkpoint directory: it holds no step-* directories and no " +
                            std::string(job::kJobFileName) +
                            " (give <--checkpoint-dir>/<job id>, or one of its step-* directories)");
  }
  std::vector<std::string> settings;
  TROUPE_RETURN_IF_ERROR(read_description(src.job_dir, &src, &settings));
  auto spec = job::from_settings(settings);
  if (!spec.ok()) return spec.status().with_context("the job's settings in " + job::job_file_path(src.job_dir));
  src.spec = std::move(*spec);
  for (const fs::path& d : *steps) src.checkpoints.push_back(entry_from_mirror(d, src.job));
  std::sort(src.checkpoints.begin(), src.checkpoints.end(),
            [](const CheckpointEntry& a, const CheckpointEntry& b) { return a.step > b.step; });
  return src;
}

}  // namespace troupe::exporting
