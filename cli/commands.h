// The `troupe` subcommands. Each registers its flags on the app and returns the function that runs
// it after parsing; that function returns the process exit code.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"

namespace troupe::cli {

// Process-wide options shared by every subcommand (--set, --log-level).
struct GlobalOptions {
  std::vector<std::string> settings;  // name=value overrides of core/config_def.h settings
  Config config;                      // filled after parsing: defaults, environment, then --set
};

using Runner = std::function<int()>;

// Exit codes: 0 success, 1 the job failed (message on stderr), 2 bad usage (bad flag or value).
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

Runner add_train_command(CLI::App& app, GlobalOptions& global);
Runner add_config_command(CLI::App& app, GlobalOptions& global);
Runner add_down_command(CLI::App& app, GlobalOptions& global);
Runner add_logs_command(CLI::App& app, GlobalOptions& global);
Runner add_up_command(CLI::App& app, GlobalOptions& global);
Runner add_status_command(CLI::App& app, GlobalOptions& global);
Runner add_head_command(CLI::App& app, GlobalOptions& global);
Runner add_node_command(CLI::App& app, GlobalOptions& global);
Runner add_spawn_command(CLI::App& app, GlobalOptions& global);
Runner add_call_command(CLI::App& app, GlobalOptions& global);
Runner add_submit_command(CLI::App& app, GlobalOptions& global);
Runner add_stop_command(CLI::App& app, GlobalOptions& global);
Runner add_timeline_command(CLI::App& app, GlobalOptions& global);
Runner add_bench_command(CLI::App& app, GlobalOptions& global);
Runner add_bench_rank_command(CLI::App& app, GlobalOptions& global);
Runner add_data_command(CLI::App& app, GlobalOptions& global);
Runner add_model_command(CLI::App& app, GlobalOptions& global);
Runner add_export_command(CLI::App& app, GlobalOptions& global);
Runner add_predict_command(CLI::App& app, GlobalOptions& global);
Runner add_tune_command(CLI::App& app, GlobalOptions& global);      // tune: hyperparameter search
Runner add_generate_command(CLI::App& app, GlobalOptions& global);  // models/gpt: continue a prompt
Runner add_tls_command(CLI::App& app, GlobalOptions& global);       // certificates of a --tls cluster

// Prints "troupe <command>: error: <status>" to stderr and returns the exit code for that status.
int report_error(const std::string& command, const Status& status);

// Returns report_error(command, expr) from the enclosing runner when `expr` (a Status) fails.
#define TROUPE_RETURN_IF_ERROR_CLI(expr, command)                     \
  do {                                                                \
    ::troupe::Status _troupe_cli_st = (expr);                         \
    if (!_troupe_cli_st.ok()) return ::troupe::cli::report_error(command, _troupe_cli_st); \
  } while (0)

}  // namespace troupe::cli
