// `troupe export JOB|CHECKPOINT_DIR --out model.safetensors [--step N] [--dtype f32|bf16|f16]
// [--lib PATH] [--json]`: a job's checkpoint as one model file (trainers/export/model_export.h).
// JOB (an id or its first hex digits) is looked up in the running cluster's GCS; a directory
// (<--checkpoint-dir>/<job>, or one of its step-* directories) needs no cluster at all.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/job_follow.h"
#include "trainers/export/model_export.h"

namespace troupe::cli {
namespace {

struct ExportFlags {
  std::string target;
  std::string out;
  int64_t step = -1;
  std::string dtype = "f32";
  std::string library;
  bool json = false;
};

int run_export(const ExportFlags& f) {
  exporting::ExportOptions o;
  o.out = std::filesystem::absolute(f.out).string();
  o.step = f.step;
  if (!parse_dtype(f.dtype, &o.dtype))
    return report_error("export", invalid_argument("--dtype '" + f.dtype + "' is not one of f32, bf16, f16"));
  if (!f.library.empty()) o.library = std::filesystem::absolute(f.library).string();
  std::error_code ec;
  const bool directory = std::filesystem::is_directory(f.target, ec) || f.target.find('/') != std::string::npos;
  Expected<exporting::CheckpointSource> src = internal_error("no source");
  std::unique_ptr<gcs::RedisStore> store;
  if (directory) {
    src = exporting::source_from_directory(f.target);
  } else {  // a job of the running cluster
    auto info = Session::current().read_cluster();
    if (!info.ok())
      return report_error("export", info.status().with_context(
                                        "'" + f.target + "' is no directory here, so it is taken as a job id, which "
                                        "needs the cluster that ran the job (or give the job's checkpoint directory)"));
    auto connected = connect_gcs(*info);
    if (!connected.ok()) return report_error("export", connected.status());
    store = std::move(*connected);
    auto job = find_job(*store, f.target);
    if (!job.ok()) return report_error("export", job.status());
    src = exporting::source_from_gcs(*store, *job);
    o.store = store.get();
  }
  if (!src.ok()) return report_error("export", src.status());
  auto r = exporting::export_model(*src, o);
  if (!r.ok()) return report_error("export", r.status());
  for (const std::string& s : r->skipped) std::fprintf(stderr, "troupe export: skipped the checkpoint of %s\n", s.c_str());
  if (f.json) {
    nlohmann::json j{{"file", r->out},           {"job_id", r->job.hex()},     {"strategy", r->strategy},
                     {"step", r->step},          {"epoch", r->epoch},          {"checkpoint", r->checkpoint_dir},
                     {"shards", r->shards},      {"trainer", r->trainer},      {"model", r->model},
                     {"parameters", r->parameters}, {"dtype", dtype_name(r->dtype)}, {"bytes", r->bytes},
                     {"skipped", r->skipped},    {"seconds", r->seconds}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("wrote %s: %s as %s, %llu bytes in %.2f s\n", r->out.c_str(), r->model.c_str(), dtype_name(r->dtype),
              static_cast<unsigned long long>(r->bytes), r->seconds);
  std::printf("  from job %s (%s), its checkpoint of step %lld (epoch %lld): %d shard file%s in %s\n",
              r->job.short_hex().c_str(), r->strategy.c_str(), static_cast<long long>(r->step),
              static_cast<long long>(r->epoch), r->shards, r->shards == 1 ? "" : "s", r->checkpoint_dir.c_str());
  return 0;
}

}  // namespace

Runner add_export_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("export", "Write a job's checkpoint as one model file (safetensors)");
  auto f = std::make_shared<ExportFlags>();
  cmd->add_option("job", f->target,
                  "A job's id (its first hex digits; needs its cluster) or its checkpoint directory "
                  "(<--checkpoint-dir>/<job>, or one step-* directory of it; no cluster needed)")
      ->required();
  cmd->add_option("--out,-o", f->out, "The model file to write (written whole or not at all)")->required();
  cmd->add_option("--step", f->step, "The checkpoint of this step (default: the newest intact one)");
  cmd->add_option("--dtype", f->dtype, "The tensors' type: f32, bf16 or f16")->capture_default_str();
  cmd->add_option("--lib", f->library, "The trainer library of a job that trained a user's trainer (default: the "
                                       "cluster's copy)");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  return [f]() { return run_export(*f); };
}

}  // namespace troupe::cli
