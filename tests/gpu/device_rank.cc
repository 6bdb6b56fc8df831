// One rank of a device-collective group in its own process (see device_rank.h).
#include "tests/gpu/device_rank.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "collectives/device_communicator.h"
#include "gcs/redis_store.h"

namespace troupe::test {
namespace {

using namespace troupe::collectives;

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int fail(const Status& st) {
  say("error " + st.to_string());
  return 1;
}

// The one node every rank of these tests shares (so form_group picks shared memory).
NodeId shared_node() {
  std::array<uint8_t, 16> bytes{};
  bytes[0] = 0x67;
  bytes[15] = 0x5a;
  return NodeId::from_bytes(bytes);
}

Status check_sum(const std::vector<float>& h, int world) {
  const float want = static_cast<float>(world * (world + 1) / 2);
  for (size_t i = 0; i < h.size(); ++i)
    if (h[i] != want)
      return internal_error("element " + std::to_string(i) + " is " + std::to_string(h[i]) + ", want " +
                            std::to_string(want));
  return {};
}

// Median microseconds of `iterations` calls of `call` after 3 warm-ups.
template <class F>
Expected<double> median_us(int iterations, F&& call) {
  std::vector<double> t;
  for (int i = 0; i < iterations + 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    TROUPE_RETURN_IF_ERROR(call());
    if (i >= 3) t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// --path host: the host all-reduce alone (pageable buffers), the staged path's baseline.
int run_host(gcs::Store& store, const GroupOptions& o, size_t count, int iterations,
             std::chrono::milliseconds timeout) {
  auto host = form_group(store, o);
  if (!host) return fail(host.status());
  say("formed host(" + (*host)->transport().kind() + ")");
  std::vector<float> h(count, static_cast<float>(o.rank + 1));
  CollectiveOptions co;
  co.timeout = timeout;
  Status st = (*host)->allreduce(h.data(), h.data(), count, DType::f32, ReduceOp::sum, co);
  if (st.ok()) st = check_sum(h, o.world_size);
  if (st.ok() && iterations > 0) {
    auto us = median_us(iterations, [&] { return (*host)->allreduce(h.data(), h.data(), count, DType::f32, ReduceOp::sum, co); });
    if (us) say("time " + std::to_string(*us));
    st = us.status();
  }
  if (!st.ok()) return fail(st);
  say("ok " + std::to_string(o.world_size * (o.world_size + 1) / 2));
  return 0;
}

}  // namespace

bool is_device_rank(int argc, char** argv) { return argc > 1 && std::string(argv[1]) == "--device-rank"; }

int device_rank_main(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 2; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  auto get = [&](const char* k, const char* fallback) { return kv.count(k) ? kv[k] : std::string(fallback); };
  const int rank = std::atoi(get("--rank", "0").c_str()), world = std::atoi(get("--world", "0").c_str());
  const int device = std::atoi(get("--device", "0").c_str());
  const std::string path = get("--path", "staged");
  const size_t count = std::strtoull(get("--count", "4194304").c_str(), nullptr, 10);
  const auto timeout = std::chrono::milliseconds(std::atoi(get("--timeout-ms", "20000").c_str()));
  const int iterations = std::atoi(get("--iterations", "0").c_str());

  gcs::RedisStoreOptions so;
  so.redis.port = std::atoi(get("--redis-port", "0").c_str());
  so.redis.password = get("--password", "");
  so.prefix = get("--prefix", "device_rank");
  auto store = gcs::RedisStore::connect(so);
  if (!store) return fail(store.status());

  GroupOptions o;
  o.name = get("--group", "g");
  o.rank = rank;
  o.world_size = world;
  o.node = shared_node();
  o.actor = ActorId::random();
  o.timeout = timeout;
  Expected<std::unique_ptr<DeviceCommunicator>> comm = unavailable("--path must be staged, nccl or host");
  if (path == "staged") {
    auto host = form_group(**store, o);
    if (!host) return fail(host.status());
    comm = make_staged_communicator(std::move(*host), device);
  } else if (path == "nccl") {
    comm = form_nccl_group(**store, o, device);
  }
  if (path == "host") return run_host(**store, o, count, iterations, timeout);
  if (!comm) return fail(comm.status());
  say("formed " + (*comm)->path());

  std::vector<float> h(count, static_cast<float>(rank + 1));
  float* d = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&d), count * sizeof(float)) != cudaSuccess)
    return fail(unavailable("cudaMalloc of " + std::to_string(count) + " floats"));
  cudaMemcpy(d, h.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  CollectiveOptions co;
  co.timeout = timeout;
  Status st = (*comm)->allreduce(d, d, count, DType::f32, ReduceOp::sum, co);
  cudaMemcpy(h.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost);
  if (st.ok()) st = check_sum(h, world);
  if (st.ok() && iterations > 0) {
    auto us = median_us(iterations, [&] { return (*comm)->allreduce(d, d, count, DType::f32, ReduceOp::sum, co); });
    if (us) say("time " + std::to_string(*us));
    st = us.status();
  }
  cudaFree(d);
  if (!st.ok()) return fail(st);
  say("ok " + std::to_string(world * (world + 1) / 2));
  return 0;
}

}  // namespace troupe::test
