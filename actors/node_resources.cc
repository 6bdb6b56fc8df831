#include "actors/node_resources.h"

#include <unistd.h>

#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/device.h"

#ifdef TROUPE_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace troupe::actors {

Status NodeResourceOptions::validate() const {
  if (cpus && (!std::isfinite(*cpus) || *cpus <= 0)) {
    return invalid_argument("--cpus " + std::to_string(*cpus) + ": must be a number > 0");
  }
  if (gpus && *gpus < 0) return invalid_argument("--gpus " + std::to_string(*gpus) + ": must be >= 0");
  if (memory_bytes && *memory_bytes <= 0) {
    return invalid_argument("--memory " + std::to_string(*memory_bytes) + ": must be > 0 bytes");
  }
  return {};
}

int hardware_cpus() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

Expected<int64_t> parse_meminfo_total(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    long long kib = -1;
    std::string unit;
    fields >> kib >> unit;
    if (!fields.fail() && kib > 0 && unit == "kB") return static_cast<int64_t>(kib) * 1024;
    return corrupt_data("meminfo: cannot read the line '" + line + "' (expected 'MemTotal: <n> kB')");
  }
  return corrupt_data("meminfo: no MemTotal line; pass --memory <bytes> to set the node's memory");
}

namespace {

Expected<int64_t> read_meminfo_total(const std::string& path) {
  std::ifstream f(path);
  if (!f) return io_error("cannot open " + path + "; pass --memory <bytes> to set the node's memory");
  std::stringstream text;
  text << f.rdbuf();
  auto total = parse_meminfo_total(text.str());
  if (!total.ok()) return total.status().with_context(path);
  return total;
}

std::string this_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// The GPUs this process can see, with names and memory where CUDA is compiled in.
std::vector<gcs::GpuInfo> detect_gpus(std::string* note) {
  std::vector<gcs::GpuInfo> gpus;
  const int n = cuda_device_count(note);
  for (int i = 0; i < n; ++i) {
    gcs::GpuInfo g;
    g.index = i;
    g.name = "cuda:" + std::to_string(i);
#ifdef TROUPE_WITH_CUDA
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      g.name = prop.name;
      g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    } else {
      cudaGetLastError();  // clear it; the device is still offered under its index
    }
#endif
    gpus.push_back(std::move(g));
  }
  return gpus;
}

}  // namespace

Expected<NodeResources> detect_node_resources(const NodeResourceOptions& options) {
  TROUPE_RETURN_IF_ERROR(options.validate());
  NodeResources r;
  r.hostname = this_hostname();
  r.total.cpus = options.cpus ? *options.cpus : hardware_cpus();
  if (options.memory_bytes) {
    r.total.memory_bytes = *options.memory_bytes;
  } else {
    auto mem = read_meminfo_total(options.meminfo_path);
    if (!mem.ok()) return mem.status().with_context("detecting node memory");
    r.total.memory_bytes = *mem;
  }
  r.gpus = detect_gpus(&r.gpu_note);
  if (options.gpus) {
    const int want = *options.gpus;
    if (want < static_cast<int>(r.gpus.size())) r.gpus.resize(want);
    for (int i = static_cast<int>(r.gpus.size()); i < want; ++i) {
      r.gpus.push_back({i, "virtual (--gpus override)", 0});
    }
  }
  r.total.gpus = static_cast<double>(r.gpus.size());
  return r;
}

}  // namespace troupe::actors
