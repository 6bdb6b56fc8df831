// `troupe logs [WHAT]`: without WHAT, lists the session's log files; with a process role (head,
// node-1, redis) or a prefix of a file name, prints the last --lines lines of that log (bounded);
// with a job id, the last --lines lines about that job from every process's log.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>

#include "cli/cluster_commands.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "gcs/tables.h"

namespace troupe::cli {
namespace fs = std::filesystem;
namespace {

// A node or actor id (or a prefix of one, as `troupe status` prints them) -> the session role of
// the process hosting it, through the GCS (the node's pid) and the session's pid files.
std::string role_for_id(const Session& session, const std::string& what) {
  if (what.size() < 4 || what.find_first_not_of("0123456789abcdef") != std::string::npos) return "";
  auto info = session.read_cluster();
  if (!info.ok()) return "";
  auto store = connect_gcs(*info);
  if (!store.ok()) return "";
  auto nodes = gcs::Table<gcs::NodeRecord>(**store).list();
  auto actors = gcs::Table<gcs::ActorRecord>(**store).list();
  if (!nodes.ok() || !actors.ok()) return "";
  std::string node_hex;
  for (const auto& n : *nodes) {
    if (n.id.hex().rfind(what, 0) == 0) node_hex = n.id.hex();
  }
  for (const auto& a : *actors) {
    if (node_hex.empty() && a.id.hex().rfind(what, 0) == 0 && !a.node.nil()) node_hex = a.node.hex();
  }
  for (const auto& n : *nodes) {
    if (n.id.hex() != node_hex) continue;
    for (const SessionProcess& p : session.processes()) {
      if (p.pid == n.pid) return p.role;
    }
  }
  return "";
}

// The job whose id starts with `what` (4+ hex digits), as its short id ("1a2b3c4d"), or "".
std::string job_for_id(const Session& session, const std::string& what) {
  if (what.size() < 4 || what.find_first_not_of("0123456789abcdef") != std::string::npos) return "";
  auto info = session.read_cluster();
  if (!info.ok()) return "";
  auto store = connect_gcs(*info);
  if (!store.ok()) return "";
  auto jobs = gcs::Table<gcs::JobRecord>(**store).list();
  if (!jobs.ok()) return "";
  for (const auto& j : *jobs) {
    if (j.id.hex().rfind(what, 0) == 0) return j.id.short_hex();
  }
  return "";
}

// The last `lines` lines of every log that mention job `short_id` (its actors log "job <id> ...").
int print_job_logs(const std::vector<fs::path>& files, const std::string& short_id, int lines) {
  const std::string needle = "job " + short_id;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::deque<std::string> tail;
    std::string line;
    while (std::getline(in, line)) {
      if (line.find(needle) == std::string::npos) continue;
      tail.push_back(line);
      if (static_cast<int>(tail.size()) > lines) tail.pop_front();
    }
    if (tail.empty()) continue;
    std::printf("==> %s <==\n", f.c_str());
    for (const auto& l : tail) std::printf("%s\n", l.c_str());
  }
  return 0;
}

}  // namespace

Runner add_logs_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("logs", "List the cluster's log files, or print the end of one");
  auto what = std::make_shared<std::string>();
  auto lines = std::make_shared<int>(50);
  cmd->add_option("what", *what,
                  "A process (head, node-1, redis), a job, node or actor id (or its first hex digits), or the "
                  "start of a log file's name");
  cmd->add_option("--lines,-n", *lines, "How many lines from the end")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  return [what, lines]() -> int {
    Session session = Session::current();
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(session.log_dir(), ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (ec || files.empty()) {
      return report_error("logs", not_found("no logs in " + session.log_dir() + "; has `troupe up` run here?"));
    }
    if (what->empty()) {
      for (const auto& f : files) {
        std::printf("%-40s %10ju bytes\n", f.filename().c_str(), static_cast<uintmax_t>(fs::file_size(f, ec)));
      }
      return 0;
    }
    if (std::string job = job_for_id(session, *what); !job.empty()) return print_job_logs(files, job, *lines);
    if (std::string role = role_for_id(session, *what); !role.empty()) *what = role;
    std::vector<fs::path> matches;
    for (const auto& f : files) {
      const std::string name = f.filename().string();
      if (name == *what + ".log" || name.rfind(*what, 0) == 0) matches.push_back(f);
    }
    if (matches.empty()) {
      std::string known;
      for (const auto& f : files) known += " " + f.stem().string();
      return report_error("logs", not_found("no log matches '" + *what + "'; logs here:" + known));
    }
    for (const auto& f : matches) {
      std::ifstream in(f);
      std::deque<std::string> tail;
      std::string line;
      while (std::getline(in, line)) {
        tail.push_back(line);
        if (static_cast<int>(tail.size()) > *lines) tail.pop_front();
      }
      if (matches.size() > 1) std::printf("==> %s <==\n", f.c_str());
      for (const auto& l : tail) std::printf("%s\n", l.c_str());
    }
    return 0;
  };
}

}  // namespace troupe::cli
