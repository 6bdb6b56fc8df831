// troupe — the command-line entry point: parse flags, fill the settings, run one subcommand.
#include <cstdio>
#include <exception>
#include <map>
#include <new>

#include "cli/commands.h"
#include "cli/session.h"
#include "core/logging.h"
#include "core/version.h"
#include "kernels/cpu/blas_info.h"

using namespace troupe;

int main(int argc, char** argv) {
  kernels::cpu::reexec_for_blas(argv);  // first: OpenBLAS reads its kernel choice only at load time
  CLI::App app{"troupe: an actor-based runtime for training ML models"};
  app.set_version_flag("--version", std::string("troupe ") + TROUPE_VERSION_STRING);
  app.require_subcommand(1);
  cli::GlobalOptions global;
  app.add_option("--set", global.settings, "Override a setting: name=value (see `troupe config`)")
      ->type_name("NAME=VALUE");

  std::map<std::string, cli::Runner> runners;
  runners["train"] = cli::add_train_command(app, global);
  runners["config"] = cli::add_config_command(app, global);
  runners["down"] = cli::add_down_command(app, global);
  runners["logs"] = cli::add_logs_command(app, global);
  runners["up"] = cli::add_up_command(app, global);
  runners["status"] = cli::add_status_command(app, global);
  runners["head"] = cli::add_head_command(app, global);
  runners["node"] = cli::add_node_command(app, global);
  runners["spawn"] = cli::add_spawn_command(app, global);
  runners["call"] = cli::add_call_command(app, global);
  runners["submit"] = cli::add_submit_command(app, global);
  runners["stop"] = cli::add_stop_command(app, global);
  runners["timeline"] = cli::add_timeline_command(app, global);
  runners["bench"] = cli::add_bench_command(app, global);
  runners["bench-rank"] = cli::add_bench_rank_command(app, global);
  runners["data"] = cli::add_data_command(app, global);
  runners["model"] = cli::add_model_command(app, global);
  runners["export"] = cli::add_export_command(app, global);
  runners["predict"] = cli::add_predict_command(app, global);
  runners["generate"] = cli::add_generate_command(app, global);
  runners["tune"] = cli::add_tune_command(app, global);
  runners["tls"] = cli::add_tls_command(app, global);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help, version, or the error and a hint
    return code == 0 ? 0 : cli::kExitUsage;
  }

  auto config = Config::from_environment();
  if (!config.ok()) return cli::report_error("troupe", config.status());
  global.config = *config;
  for (const std::string& s : global.settings) {
    Status st = global.config.set_assignment(s);
    if (!st.ok()) {
      std::fprintf(stderr, "troupe: error: --set %s\n", st.message().c_str());
      return cli::kExitUsage;
    }
  }
  const std::string command = app.get_subcommands().front()->get_name();
  LogOptions log;
  log.process_name = "troupe-" + command;
  log.log_dir = global.config.log_dir;
  log.file_level = global.config.log_level;
  log.console_level = global.config.console_log_level;
  if (command == "head" || command == "node") {
    // Cluster processes log into the session; their stderr is their log file there (troupe logs).
    log.log_dir = cli::Session::current().log_dir();
    log.console_level = "info";
  }
  Status st = init_logging(log);
  if (!st.ok()) {
    if (st.code() == Code::invalid_argument) return cli::report_error(command, st);
    std::fprintf(stderr, "troupe: warning: %s; logging to stderr only\n", st.message().c_str());
  }
  try {
    return runners.at(command)();
  } catch (const std::bad_alloc&) {
    return cli::report_error(command, unavailable("out of memory (a dataset or file larger than this machine holds?)"));
  } catch (const std::exception& e) {  // a bug: say so rather than abort
    return cli::report_error(command, internal_error(std::string("unexpected exception: ") + e.what() +
                                                     " (a bug in troupe: please report it with the command)"));
  }
}
