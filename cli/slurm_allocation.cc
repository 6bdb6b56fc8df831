#include "cli/slurm_allocation.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/process.h"

namespace troupe::cli {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Expected<std::vector<double>> parse_cpus_per_node(const std::string& value, size_t nodes) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("SLURM_JOB_CPUS_PER_NODE='" + value + "': " + why);
  };
  std::vector<double> out;
  std::stringstream in(value);
  std::string item;
  while (std::getline(in, item, ',')) {
    // COUNT or COUNT(xREPEAT)
    size_t used = 0;
    long count = 0, repeat = 1;
    try {
      count = std::stol(item, &used);
    } catch (const std::exception&) {
      return bad("'" + item + "' does not start with a CPU count");
    }
    const std::string rest = item.substr(used);
    if (!rest.empty()) {
      if (rest.size() < 4 || rest.compare(0, 2, "(x") != 0 || rest.back() != ')') return bad("cannot read '" + item + "'");
      try {
        size_t r_used = 0;
        repeat = std::stol(rest.substr(2, rest.size() - 3), &r_used);
        if (r_used != rest.size() - 3) return bad("cannot read '" + item + "'");
      } catch (const std::exception&) {
        return bad("cannot read '" + item + "'");
      }
    }
    if (count <= 0 || repeat <= 0 || repeat > 100000) return bad("'" + item + "' is out of range");
    for (long i = 0; i < repeat; ++i) out.push_back(static_cast<double>(count));
  }
  if (out.size() != nodes) {
    return bad("counts " + std::to_string(out.size()) + " nodes, the allocation has " + std::to_string(nodes));
  }
  return out;
}

std::map<std::string, std::string> parse_node_addresses(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream words(line);
    std::string word, name, addr;
    while (words >> word) {
      if (word.rfind("NodeName=", 0) == 0) name = word.substr(9);
      if (word.rfind("NodeAddr=", 0) == 0) addr = word.substr(9);
    }
    if (!name.empty()) out[name] = addr.empty() ? name : addr;
  }
  return out;
}

Expected<std::string> run_for_output(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  std::string command;
  for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
  char path[] = "/tmp/troupe-out-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return io_error("cannot make a temporary file for `" + command + "`'s output");
  ::close(fd);
  SpawnOptions o;
  o.argv = argv;
  o.log_file = path;
  o.detach = false;
  auto pid = spawn_process(o);
  if (!pid.ok()) {
    std::remove(path);
    return pid.status().with_context("running `" + command + "`");
  }
  auto code = wait_process(*pid, timeout);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::remove(path);
  if (!code.ok()) {
    (void)stop_process(*pid, std::chrono::milliseconds(500));
    return code.status().with_context("`" + command + "`");
  }
  if (*code != 0) {
    return unavailable("`" + command + "` exited " + std::to_string(*code) + ": " + trimmed(text.str()));
  }
  return text.str();
}

Expected<SlurmAllocation> read_slurm_allocation() {
  SlurmAllocation a;
  a.job_id = env_or_empty("SLURM_JOB_ID");
  const std::string nodelist = env_or_empty("SLURM_JOB_NODELIST");
  if (a.job_id.empty() || nodelist.empty()) {
    return invalid_argument(
                  "--slurm: not inside a Slurm allocation (SLURM_JOB_ID and SLURM_JOB_NODELIST are not set); run it "
                  "in an sbatch script (see examples/slurm/train.sbatch) or in `salloc` through `srun --pty`");
  }
  a.this_node = env_or_empty("SLURMD_NODENAME");
  const auto timeout = std::chrono::seconds(30);
  auto names = run_for_output({"scontrol", "show", "hostnames", nodelist}, timeout);
  if (!names.ok()) return names.status().with_context("--slurm: expanding SLURM_JOB_NODELIST");
  auto shown = run_for_output({"scontrol", "show", "node", "-o", nodelist}, timeout);
  if (!shown.ok()) return shown.status().with_context("--slurm: reading the allocation's node addresses");
  const auto addresses = parse_node_addresses(*shown);
  std::stringstream lines(*names);
  std::string name;
  while (std::getline(lines, name)) {
    name = trimmed(name);
    if (name.empty()) continue;
    auto it = addresses.find(name);
    if (it == addresses.end()) {
      return unavailable("--slurm: `scontrol show node -o " + nodelist + "` does not show node " + name);
    }
    a.nodes.push_back({name, it->second, 0});
  }
  if (a.nodes.empty()) return unavailable("--slurm: SLURM_JOB_NODELIST='" + nodelist + "' names no nodes");
  auto cpus = parse_cpus_per_node(env_or_empty("SLURM_JOB_CPUS_PER_NODE"), a.nodes.size());
  if (!cpus.ok()) return cpus.status().with_context("--slurm");
  for (size_t i = 0; i < a.nodes.size(); ++i) a.nodes[i].cpus = (*cpus)[i];
  return a;
}

std::vector<std::string> srun_node_command(const SlurmAllocation& a, const SlurmNode& node, const std::string& troupe,
                                           const std::string& head_address) {
  char cpus[32];
  std::snprintf(cpus, sizeof cpus, "%g", node.cpus);
  return {"srun", "--overlap", "--jobid=" + a.job_id, "--nodes=1", "--ntasks=1", "--nodelist=" + node.name,
          "--cpus-per-task=" + std::to_string(static_cast<long>(node.cpus)), "--kill-on-bad-exit=0",
          "--job-name=troupe-node-" + node.name, troupe, "node", "--address", head_address, "--bind", node.address,
          "--cpus", cpus};
}

Expected<std::vector<std::string>> troupe_node_steps(const std::string& job_id) {
  auto out = run_for_output({"squeue", "--steps", "--jobs=" + job_id, "--noheader", "--format=%i %j"},
                            std::chrono::seconds(30));
  if (!out.ok()) return out.status();
  std::vector<std::string> steps;
  std::stringstream lines(*out);
  std::string id, name;
  while (lines >> id >> name) {
    if (name.rfind("troupe-node-", 0) == 0) steps.push_back(id);
  }
  return steps;
}

}  // namespace troupe::cli
