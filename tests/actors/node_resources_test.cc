#include "actors/node_resources.h"

#include <cmath>
#include <fstream>

#include <catch2/catch.hpp>

#include "core/device.h"
#include "tests/core/temp_dir.h"

using namespace troupe;
using namespace troupe::actors;

TEST_CASE("node resources: detects this machine", "[actors][node_resources]") {
  auto r = detect_node_resources();
  REQUIRE(r.ok());
  CHECK_FALSE(r->hostname.empty());
  CHECK(r->total.cpus == hardware_cpus());
  CHECK(r->total.cpus >= 1);
  CHECK(r->total.memory_bytes > (int64_t{64} << 20));  // any machine troupe runs on has more than 64 MiB
  CHECK(r->total.gpus == cuda_device_count());
  CHECK(r->gpus.size() == static_cast<size_t>(r->total.gpus));
  if (r->gpus.empty()) CHECK_FALSE(r->gpu_note.empty());  // says why there is none
  for (size_t i = 0; i < r->gpus.size(); ++i) {
    CHECK(r->gpus[i].index == static_cast<int>(i));
    CHECK_FALSE(r->gpus[i].name.empty());
#ifdef TROUPE_WITH_CUDA
    CHECK(r->gpus[i].memory_bytes > 0);
#endif
  }
}

TEST_CASE("node resources: options override what is detected", "[actors][node_resources]") {
  NodeResourceOptions o;
  o.cpus = 2.5;
  o.gpus = 4;
  o.memory_bytes = int64_t{8} << 30;
  auto r = detect_node_resources(o);
  REQUIRE(r.ok());
  CHECK(r->total.cpus == 2.5);
  CHECK(r->total.gpus == 4);
  CHECK(r->total.memory_bytes == int64_t{8} << 30);
  REQUIRE(r->gpus.size() == 4);
  const int real = cuda_device_count();
  for (int i = 0; i < 4; ++i) {
    CHECK(r->gpus[i].index == i);
    if (i >= real) CHECK(r->gpus[i].name == "virtual (--gpus override)");
  }
  o.gpus = 0;  // hide every GPU from the scheduler
  auto none = detect_node_resources(o);
  REQUIRE(none.ok());
  CHECK(none->total.gpus == 0);
  CHECK(none->gpus.empty());
}

TEST_CASE("node resources: bad overrides are refused naming the option", "[actors][node_resources]") {
  auto refused = [](NodeResourceOptions o, const std::string& fragment) {
    auto r = detect_node_resources(o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::invalid_argument);
    CHECK(r.status().message().find(fragment) != std::string::npos);
  };
  NodeResourceOptions o;
  o.cpus = 0;
  refused(o, "--cpus");
  o = {};
  o.cpus = std::nan("");
  refused(o, "--cpus");
  o = {};
  o.gpus = -1;
  refused(o, "--gpus -1");
  o = {};
  o.memory_bytes = 0;
  refused(o, "--memory");
}

TEST_CASE("node resources: memory comes from MemTotal", "[actors][node_resources]") {
  CHECK(parse_meminfo_total("MemTotal:       16318412 kB\nMemFree:  1 kB\n").value() == int64_t{16318412} * 1024);
  CHECK(parse_meminfo_total("MemFree: 1 kB\nMemTotal: 2048 kB\n").value() == 2048 * 1024);
  for (const char* bad : {"MemFree: 1 kB\n", "MemTotal: lots\n", "MemTotal: 12 MB\n", ""}) {
    auto r = parse_meminfo_total(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Code::corrupt_data);
  }

  testing::TempDir dir;
  const std::string path = dir.path() + "/meminfo";
  std::ofstream(path) << "MemTotal: 1024 kB\n";
  NodeResourceOptions o;
  o.meminfo_path = path;
  CHECK(detect_node_resources(o).value().total.memory_bytes == 1024 * 1024);
  o.meminfo_path = dir.path() + "/absent";
  auto missing = detect_node_resources(o);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Code::io_error);
  CHECK(missing.status().message().find("--memory") != std::string::npos);  // says what to do
  o.memory_bytes = 4096;  // an explicit amount needs no meminfo
  CHECK(detect_node_resources(o).ok());
}
