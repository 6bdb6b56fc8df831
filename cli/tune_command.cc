// `troupe tune`: a hyperparameter search on the running cluster. Every flag of `troupe submit`
// describes the trials' common job; each `--search NAME=KIND(...)` varies one of them
// (tune/search_space.h). The CLI builds every trial's job up front (random draws seeded by --seed,
// grids enumerated), checks each as `troupe submit` would, and writes the search into the GCS
// (gcs/search_record.h); the head's search supervisor (actors/search_supervisor.h) submits the
// trials as jobs, stops the ones ASHA drops at its rungs, and names the best. This command then
// follows the search, printing trials as they start, end or are stopped, and the table at the end
// (`--detach`: print the search id and return). `troupe tune show|stop|list` look at searches;
// `troupe tune --resume DIR` starts a search again from its search.json on a new cluster.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/job_submissions.h"
#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/submit_flags.h"
#include "cli/tune_show.h"
#include "gcs/events.h"
#include "gcs/job_epochs.h"
#include "gcs/search_record.h"
#include "trainers/job/ps_member.h"
#include "trainers/library/trainer_library_store.h"
#include "tune/asha.h"
#include "tune/search_space.h"

namespace troupe::cli {
namespace {

namespace fs = std::filesystem;

struct TuneFlags {
  SubmitFlags job;
  std::vector<std::string> search;
  int trials = 0;
  int max_concurrent = 0;
  std::string metric = "test_accuracy";
  std::string mode;
  std::string scheduler = "fifo";
  int grace = 1;
  int eta = 3;
  std::string dir;
  std::string resume;
  bool detach = false;
  double stall_timeout = 600;
  std::string target;  // show / stop
  bool show_json = false;
};

// Flags a search may not vary, and why.
const std::map<std::string, std::string>& not_searchable() {
  static const std::map<std::string, std::string> m = {
      {"epochs", "every trial trains the same epochs (they are what the rungs and trial-epochs count)"},
      {"save", "--save names where the best trial's model goes"},
      {"name", "the trials are named after the search"},
      {"lib", "one trainer library serves every trial"},
      {"trainer", "vary the model with --search model=choice(...)"},
      {"json", "an output flag"},
      {"no-progress", "an output flag"},
      {"checkpoint-dir", "the trials' checkpoints go under the search's directory"},
      {"help", "not a training flag"}};
  return m;
}

Status check_searchable(CLI::App* cmd, const std::string& name) {
  if (name.rfind("trainer-arg.", 0) == 0) {
    if (name.size() == std::string("trainer-arg.").size()) return invalid_argument("--search trainer-arg.KEY needs a KEY");
    return {};
  }
  if (auto it = not_searchable().find(name); it != not_searchable().end())
    return invalid_argument("--search " + name + ": cannot be searched: " + it->second);
  try {
    (void)cmd->get_option("--" + name);
  } catch (const CLI::OptionNotFound&) {
    return invalid_argument("--search " + name + ": troupe submit has no flag --" + name +
                            " (a search varies submit flags by their long name, e.g. lr, batch-size, hidden, "
                            "optimizer, or a trainer argument as trainer-arg.KEY)");
  }
  return {};
}

// Sets flag `name` to `value` as if typed (its checks apply).
Status apply_setting(CLI::App* cmd, TuneFlags& f, const std::string& name, const std::string& value) {
  if (name.rfind("trainer-arg.", 0) == 0) {
    const std::string key = name.substr(std::string("trainer-arg.").size());
    auto& args = f.job.train.options.trainer_args;
    args.erase(std::remove_if(args.begin(), args.end(), [&](const std::string& a) { return a.rfind(key + "=", 0) == 0; }),
               args.end());
    args.push_back(key + "=" + value);
    return {};
  }
  CLI::Option* opt = cmd->get_option("--" + name);
  try {
    opt->clear();
    opt->add_result(value);
    opt->run_callback();
  } catch (const CLI::Error& e) {
    return invalid_argument("--search " + name + ": the value '" + value + "' is not one --" + name + " takes: " + e.what());
  }
  return {};
}

std::string default_dir(const std::string& name) {
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / "troupe-results" / name).string();
}

Expected<gcs::SearchRecord> build_search(CLI::App* cmd, TuneFlags& f, gcs::Store& store) {
  if (f.search.empty()) return invalid_argument("give at least one --search NAME=KIND(...) (e.g. --search 'lr=loguniform(1e-4,1e-1)')");
  std::vector<tune::SearchParam> params;
  bool grid = false;
  for (const std::string& text : f.search) {
    auto p = tune::parse_search_param(text);
    if (!p.ok()) return p.status();
    TROUPE_RETURN_IF_ERROR(check_searchable(cmd, p->name));
    grid = grid || p->kind == tune::SearchParam::Kind::grid;
    params.push_back(*p);
  }
  if (f.trials == 0 && !grid) return invalid_argument("--trials N: how many trials to draw (needed unless every choice is a grid(...))");
  auto drawn = tune::expand_trials(params, f.trials == 0 ? 1 : f.trials, f.job.train.options.seed);
  if (!drawn.ok()) return drawn.status();

  gcs::SearchRecord s;
  s.id = SearchId::random();
  s.name = f.job.spec.name.empty() ? "search-" + s.id.short_hex() : f.job.spec.name;
  s.space = f.search;
  if (!gcs::known_epoch_metric(f.metric)) {
    return invalid_argument("--metric " + f.metric + ": no trial reports it; trials report test_accuracy, test_loss "
                            "(val_accuracy, val_loss: the same evaluation data), train_loss and train_accuracy");
  }
  s.metric = f.metric;
  s.mode = f.mode.empty() ? (f.metric.find("loss") != std::string::npos ? "min" : "max") : f.mode;
  s.scheduler = f.scheduler;
  s.grace = f.grace;
  s.eta = f.eta;
  s.max_concurrent = f.max_concurrent;
  s.seed = f.job.train.options.seed;
  s.dir = fs::absolute(f.dir.empty() ? default_dir(s.name) : f.dir).string();
  const std::string save = f.job.train.options.save_path;
  if (!save.empty()) {
    s.save = fs::absolute(save).string();
    const fs::path parent = fs::path(s.save).parent_path();
    if (!fs::is_directory(parent)) return invalid_argument("--save " + save + ": the directory " + parent.string() + " does not exist");
  }
  // The library once, for every trial.
  std::string library;
  if (!f.job.train.lib.empty()) {
    auto lib = put_trainer_library(store, f.job.train.lib);
    if (!lib.ok()) return lib.status().with_context("--lib");
    library = lib->checksum;
  }
  const std::vector<std::string> base_trainer_args = f.job.train.options.trainer_args;
  const std::string base_model = f.job.train.options.model;  // finish_train_flags expands torchscript:FILE in place
  const bool workers_given = f.job.workers_flag->count() > 0;
  for (size_t k = 0; k < drawn->size(); ++k) {
    const tune::TrialSettings& settings = (*drawn)[k];
    f.job.train.options.trainer_args = base_trainer_args;
    f.job.train.options.model = base_model;
    for (const auto& [name, value] : settings) TROUPE_RETURN_IF_ERROR(apply_setting(cmd, f, name, value));
    gcs::TrialRecord t;
    t.index = static_cast<int>(k);
    t.settings = settings;
    const std::string what = "trial " + std::to_string(k) + " (" + gcs::describe_settings(t) + ")";
    auto spec = flags_spec(f.job);
    if (!spec.ok()) return spec.status().with_context(what);
    spec->library = library;
    spec->name = s.name + "/trial-" + std::to_string(k);
    spec->train.save_path = s.save.empty() ? "" : (fs::path(s.dir) / ("trial-" + std::to_string(k) + ".safetensors")).string();
    if (spec->checkpoint_every > 0 && spec->checkpoint_dir.empty()) spec->checkpoint_dir = (fs::path(s.dir) / "checkpoints").string();
    if (spec->train.loss == "mse" && s.metric.find("accuracy") != std::string::npos) {
      return invalid_argument("--metric " + s.metric + ": no trial reports it: --loss mse trains a regression, which "
                              "reports losses only (use --metric test_loss)");
    }
    TROUPE_RETURN_IF_ERROR(finish_submit_spec(store, *spec, workers_given).with_context(what));
    s.epochs = spec->train.epochs;
    t.job = JobId::random();
    t.submission = actors::submission_json(submit_message(t.job, *spec));
    t.spec = job::to_settings(*spec);
    t.strategy = spec->strategy;
    t.workers = spec->workers;
    t.ps = job::server_count(*spec);
    t.model_path = spec->train.save_path;
    s.trials.push_back(std::move(t));
  }
  if (s.scheduler == "asha" && tune::asha_rungs(s.grace, s.eta, s.epochs).empty()) {
    return invalid_argument("--scheduler asha: no rung below the trials' " + std::to_string(s.epochs) +
                            " epochs with --grace-period " + std::to_string(s.grace) +
                            " (train more epochs or lower the grace period)");
  }
  s.created_ms = gcs::now_ms();
  s.updated_ms = s.created_ms;
  return s;
}

// A search whose trials' jobs went with an old cluster: the trials that had not ended start over
// as new jobs (WAITING), those that ended stay as they were.
Expected<gcs::SearchRecord> resume_search(gcs::Store& store, const std::string& what) {
  auto s = gcs::read_search_file(what);
  if (!s.ok() && !fs::exists(what)) {
    // An id (or prefix) of a search this cluster still has, or one kept under ~/troupe-results.
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(fs::path(default_dir("")), ec)) {
      auto kept = gcs::read_search_file(d.path().string());
      if (kept.ok() && what.size() >= 4 && kept->id.hex().rfind(what, 0) == 0) {
        s = kept;
        break;
      }
    }
  }
  if (!s.ok()) {
    auto id = gcs::find_search(store, what);
    if (!id.ok()) {
      return s.status().with_context("--resume " + what + " (neither a search directory, nor a search under " +
                                     default_dir("") + ", nor a search of this cluster)");
    }
    auto rec = gcs::get_search(store, *id);
    if (!rec.ok()) return rec.status();
    if (!gcs::search_finished(rec->state))
      return invalid_argument("--resume: search " + id->short_hex() + " is RUNNING on this cluster: its head goes on "
                              "with it by itself (troupe tune show " + id->short_hex() + ")");
    return invalid_argument("--resume: search " + id->short_hex() + " already ended (" + rec->state + ")");
  }
  if (gcs::search_finished(s->state)) return invalid_argument("--resume " + what + ": the search already ended (" + s->state + ")");
  s->paused = false;
  s->message = "resumed";
  auto have = gcs::get_search(store, s->id);
  if (have.ok()) return invalid_argument("--resume: search " + s->id.short_hex() + " is already on this cluster (" + have->state + ")");
  int restarted = 0;
  for (gcs::TrialRecord& t : s->trials) {
    if (gcs::trial_finished(t.state)) continue;
    auto spec = job::from_settings(t.spec);
    if (!spec.ok()) return spec.status().with_context("trial " + std::to_string(t.index) + "'s settings");
    if (!spec->library.empty())
      return invalid_argument("--resume: trial " + std::to_string(t.index) + " trains a --lib trainer whose library "
                              "went with the old cluster's GCS; start a new search with --lib");
    TROUPE_RETURN_IF_ERROR(finish_submit_spec(store, *spec, true).with_context("trial " + std::to_string(t.index)));
    const JobId old = t.job;
    t.job = JobId::random();
    t.submission = actors::submission_json(submit_message(t.job, *spec));
    t.state = "WAITING";
    t.message = (t.started_ms ? "started over: its job " + old.short_hex() + " went with the old cluster"
                              : std::string());
    t.epochs.clear();
    t.rungs_passed.clear();
    t.started_ms = 0;
    ++restarted;
  }
  std::fprintf(stderr, "search %s resumed from %s: %d trials to run, %zu already ended\n", s->id.short_hex().c_str(),
               s->dir.c_str(), restarted, s->trials.size() - static_cast<size_t>(restarted));
  return s;
}

// Follows the search until it ends; prints what changes, then the table (or the JSON summary).
int follow_search(gcs::Store& store, const SearchId& id, const TuneFlags& f) {
  std::map<int, std::pair<std::string, size_t>> seen;  // trial -> (state, epochs)
  auto last_change = std::chrono::steady_clock::now();
  int64_t last_updated = -1;
  const auto stall = std::chrono::milliseconds(static_cast<int64_t>(f.stall_timeout * 1000));
  for (;;) {
    auto s = gcs::get_search(store, id);
    if (s.ok()) {
      if (s->updated_ms != last_updated) {
        last_updated = s->updated_ms;
        last_change = std::chrono::steady_clock::now();
      }
      for (const gcs::TrialRecord& t : s->trials) {
        auto& [state, epochs] = seen[t.index];
        if (state == t.state && epochs == t.epochs.size()) continue;
        if (!f.job.train.json && state != t.state && t.state != "WAITING") {
          std::string line = "trial " + std::to_string(t.index) + " (" + gcs::describe_settings(t) + "): " + t.state;
          double v = 0;
          if (gcs::trial_finished(t.state) && gcs::trial_metric(*s, t, 0, &v)) {
            char b[64];
            std::snprintf(b, sizeof b, " after %d epochs, %s %.4f", t.epochs.back().epoch, s->metric.c_str(), v);
            line += b;
          }
          if (gcs::trial_finished(t.state) && t.state != "SUCCEEDED") line += ": " + t.message;
          std::fprintf(stderr, "%s\n", line.c_str());
        }
        state = t.state;
        epochs = t.epochs.size();
      }
      if (gcs::search_finished(s->state)) {
        if (f.job.train.json) std::printf("%s\n", gcs::search_summary_json(*s).dump().c_str());
        else print_search_table(stdout, *s);
        return s->state == "SUCCEEDED" ? 0 : kExitFailure;
      }
    }
    if (std::chrono::steady_clock::now() - last_change > stall) {
      return report_error("tune", Status(Code::timeout, "search " + id.short_hex() + " changed nothing for " +
                                                           std::to_string(static_cast<int>(f.stall_timeout)) +
                                                           " s (is the head up? troupe status); it goes on: "
                                                           "troupe tune show " + id.short_hex()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

Runner add_tune_command(CLI::App& app, GlobalOptions& global) {
  auto* cmd = app.add_subcommand("tune", "Hyperparameter search: many trials as jobs, ASHA early stopping, the best model kept");
  auto f = std::make_shared<TuneFlags>();
  add_job_flags(cmd, f->job);
  cmd->add_option("--search", f->search,
                  "NAME=KIND(...): vary submit flag NAME (or trainer-arg.KEY) by choice(a,b,...), grid(a,b,...), "
                  "uniform(low,high), loguniform(low,high) or randint(low,high) (repeatable)");
  cmd->add_option("--trials", f->trials, "Trials to draw (with grid(...): runs of the whole grid; default 1 then)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--max-concurrent", f->max_concurrent, "Trials submitted at once (0: all; the cluster's room decides)")
      ->check(CLI::Range(0, 10000))->capture_default_str();
  cmd->add_option("--metric", f->metric, "What trials are ranked by: test_accuracy, test_loss, val_accuracy, val_loss, "
                  "train_loss, train_accuracy")->capture_default_str();
  cmd->add_option("--mode", f->mode, "max or min (default: min for a loss, else max)")->check(CLI::IsMember({"max", "min"}));
  cmd->add_option("--scheduler", f->scheduler, "fifo (every trial runs all its epochs) or asha (early stopping)")
      ->check(CLI::IsMember({"fifo", "asha"}))->capture_default_str();
  cmd->add_option("--grace-period", f->grace, "asha: the first rung's epoch")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--reduction-factor", f->eta, "asha: 1/ETA of the trials at a rung go on; rungs at grace x ETA^i")
      ->check(CLI::Range(2, 100))->capture_default_str();
  cmd->add_option("--search-dir", f->dir, "The search's directory: search.json, trial models, checkpoints "
                  "(default ~/troupe-results/NAME)");
  cmd->add_option("--resume", f->resume, "Run the unfinished trials of a search again, from its directory (after a "
                  "whole-cluster restart)");
  cmd->add_flag("--detach", f->detach, "Print the search id and return at once");
  cmd->add_option("--stall-timeout", f->stall_timeout, "Give up following when the search changes nothing for this long")
      ->check(CLI::PositiveNumber)->capture_default_str();
  auto* show = cmd->add_subcommand("show", "A search's trials: settings, state, metric by epoch, wall time");
  show->add_option("SEARCH", f->target, "Search id (or a prefix)")->required();
  show->add_flag("--json", f->show_json, "One JSON document");
  auto* stop = cmd->add_subcommand("stop", "Stop a search: its running trials are cancelled");
  stop->add_option("SEARCH", f->target, "Search id (or a prefix)")->required();
  auto* list = cmd->add_subcommand("list", "The searches of this cluster, one line each");

  return [f, cmd, show, stop, list, &global]() -> int {
    (void)global;
    auto info = Session::current().read_cluster();
    if (!info.ok()) return report_error("tune", info.status());
    auto store = connect_gcs(*info);
    if (!store.ok()) return report_error("tune", store.status());
    gcs::Store& gcs = **store;
    if (list->parsed()) {
      auto all = gcs::list_searches(gcs);
      if (!all.ok()) return report_error("tune", all.status());
      std::sort(all->begin(), all->end(), [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
      for (const gcs::SearchRecord& s : *all) std::printf("%s\n", search_line(s).c_str());
      if (all->empty()) std::printf("no searches\n");
      return 0;
    }
    if (show->parsed() || stop->parsed()) {
      auto id = gcs::find_search(gcs, f->target);
      if (!id.ok()) return report_error("tune", id.status());
      if (stop->parsed()) {
        auto s = gcs::update_search(gcs, *id, [](gcs::SearchRecord& r) -> Status {
          if (gcs::search_finished(r.state)) return invalid_argument("search " + r.id.short_hex() + " already ended (" + r.state + ")");
          r.stop_requested = true;
          return {};
        });
        if (!s.ok()) return report_error("tune", s.status());
        std::fprintf(stderr, "search %s: stop requested; the head cancels its trials\n", id->short_hex().c_str());
        return 0;
      }
      auto s = gcs::get_search(gcs, *id);
      if (!s.ok()) return report_error("tune", s.status());
      if (f->show_json) std::printf("%s\n", gcs::search_summary_json(*s).dump(1).c_str());
      else print_search_table(stdout, *s);
      return 0;
    }
    Expected<gcs::SearchRecord> s = f->resume.empty() ? build_search(cmd, *f, gcs) : resume_search(gcs, f->resume);
    if (!s.ok()) return report_error("tune", s.status());
    TROUPE_RETURN_IF_ERROR_CLI(gcs::write_search_file(*s), "tune");
    TROUPE_RETURN_IF_ERROR_CLI(gcs::put_search(gcs, *s), "tune");
    if (f->detach) {
      std::printf("%s\n", s->id.hex().c_str());
      return 0;
    }
    std::fprintf(stderr, "search %s (%s): %zu trials, %s, %s %s; directory %s; `troupe tune stop %s` stops it\n",
                 s->id.short_hex().c_str(), s->name.c_str(), s->trials.size(), s->scheduler.c_str(), s->metric.c_str(),
                 s->mode.c_str(), s->dir.c_str(), s->id.short_hex().c_str());
    return follow_search(gcs, s->id, *f);
  };
}

}  // namespace troupe::cli
