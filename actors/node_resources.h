// What a node offers the cluster: CPUs, memory, GPUs (with names and memory where troupe is built
// with CUDA) and its hostname, as detected on this machine and then overridden by options
// (`troupe start --cpus 4 --gpus 2 ...`).
//
// Overrides change only the scheduling view — what the head may place here. `--gpus 4` on a machine
// with one GPU makes a fake four-GPU node for tests of multi-GPU placement; it does not create
// devices, and actors on such a node still see the real ones (or none). GPUs beyond the detected
// ones are listed as "virtual (--gpus override)" with 0 bytes of memory; `--gpus 1` on a four-GPU
// machine offers the first one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "gcs/records.h"

namespace troupe::actors {

struct NodeResourceOptions {
  std::optional<double> cpus;            // --cpus: > 0 and finite; default: hardware threads
  std::optional<int> gpus;               // --gpus: >= 0; default: CUDA devices visible
  std::optional<int64_t> memory_bytes;   // --memory: > 0; default: MemTotal of meminfo_path
  std::string meminfo_path = "/proc/meminfo";

  // invalid_argument naming the option and its value.
  Status validate() const;
};

struct NodeResources {
  std::string hostname;
  gcs::Resources total;              // what the scheduler may hand out
  std::vector<gcs::GpuInfo> gpus;    // total.gpus entries
  std::string gpu_note;              // why no GPU was detected ("built without CUDA", ...); may be empty
};

// Detects this machine's resources and applies the overrides. Fails with invalid_argument for bad
// options and io_error / corrupt_data when memory cannot be read (and was not given).
Expected<NodeResources> detect_node_resources(const NodeResourceOptions& options = {});

// MemTotal of a /proc/meminfo text, in bytes. corrupt_data when the line is missing or malformed.
Expected<int64_t> parse_meminfo_total(const std::string& text);

// Hardware threads of this machine (at least 1).
int hardware_cpus();

}  // namespace troupe::actors
