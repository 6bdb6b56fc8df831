// The Slurm allocation `troupe up --slurm` runs in (inside `sbatch` or `salloc` + `srun`): its
// nodes in order, the address each is reached at and the CPUs the allocation gives each, read from
// the variables Slurm sets (SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_CPUS_PER_NODE,
// SLURMD_NODENAME) and from `scontrol` (hostlist expansion, NodeAddr). GPUs are not counted here:
// a step inherits the job's GPUs on its node (CUDA_VISIBLE_DEVICES set by Slurm), and the node
// process offers the devices it sees.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::cli {

struct SlurmNode {
  std::string name;     // Slurm's NodeName
  std::string address;  // its NodeAddr (what troupe's processes on it bind to)
  double cpus = 0;      // CPUs of the allocation on it
};

struct SlurmAllocation {
  std::string job_id;
  std::string this_node;        // SLURMD_NODENAME: the node this process runs on ("" outside a step)
  std::vector<SlurmNode> nodes; // in the allocation's order; the head goes on nodes[0]
};

// SLURM_JOB_CPUS_PER_NODE ("2(x3),1": three nodes with 2, one with 1) expanded to one count per
// node; invalid_argument naming the variable when malformed or when it does not count `nodes`.
Expected<std::vector<double>> parse_cpus_per_node(const std::string& value, size_t nodes);

// NodeName -> NodeAddr from `scontrol show node -o` output (one node per line, KEY=VALUE words).
std::map<std::string, std::string> parse_node_addresses(const std::string& scontrol_output);

// Runs `argv` (the program looked up on PATH), returns its stdout+stderr when it exits 0 within
// `timeout`; otherwise an error naming the command, its exit and what it printed.
Expected<std::string> run_for_output(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// The allocation this process runs in. invalid_argument when there is none (no SLURM_JOB_ID),
// naming what to do; errors of scontrol name the command.
Expected<SlurmAllocation> read_slurm_allocation();

// The srun command line that starts troupe's node process on `node` as a step of the allocation
// (sharing its CPUs and GPUs with the other steps: --overlap), named `troupe-node-<name>`. The
// join token travels in the environment (TROUPE_TOKEN, exported by srun), never on a command line.
std::vector<std::string> srun_node_command(const SlurmAllocation& a, const SlurmNode& node,
                                           const std::string& troupe, const std::string& head_address);

// Step ids ("12.3") of the allocation's steps that run troupe node processes (named as above).
Expected<std::vector<std::string>> troupe_node_steps(const std::string& job_id);

}  // namespace troupe::cli
