// One rank of a collective group in its own process, for the multi-process tests
// (collectives_multiprocess_test.cc). Forms the group through a real RedisStore with form_group and
// runs allreduces; reports every step as one line on stdout, which the test reads:
//
//   formed <generation> <rank> <world> <transport>   the group connected (tcp, shm, hierarchical)
//   round <k> ok <sum>                      allreduce k returned, every element equal to <sum>
//   round <k> error <ms> <code>: <message>  allreduce k failed after <ms> milliseconds
//   reformed <generation> <rank> <world>    after a failure, the survivors connected again
//   final ok <sum> | final error <code>: <message>
//   form error <code>: <message>            form_group itself failed
//
// Each rank contributes <value> (default rank + 1) to every element, so the sum names who took part.
// After a failed round, a rank given --reform-rank records the failure in the GCS, forms the group
// again at generation + 1 as that rank of --reform-world, and runs one more allreduce.
//
// usage: troupe_collective_rank --redis-port P --password W --prefix X --group G --generation N
//          --rank R --world W [--count 1000] [--dtype f32|f16|bf16] [--rounds 1] [--value V]
//          [--timeout-ms 5000] [--reform-rank R2 --reform-world W2]
//          [--redis-host H] [--host LISTEN_IP] [--node LABEL] [--transport auto|tcp|shm|hierarchical]
// Ranks given the same --node label share a node id (default: every rank its own node).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "collectives/group_rendezvous.h"
#include "core/dtype.h"
#include "gcs/redis_store.h"

using namespace troupe;
using namespace troupe::collectives;

namespace {

struct Flags {
  int redis_port = 0;
  std::string password, prefix, group;
  std::string redis_host = "127.0.0.1", host = "127.0.0.1", node, transport = "auto";
  int64_t generation = 0;
  int rank = 0, world = 0, rounds = 1, reform_rank = -1, reform_world = 0;
  size_t count = 1000;
  DType dtype = DType::f32;
  float value = 0;
  std::chrono::milliseconds timeout{5000};
};

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

Expected<Flags> parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) kv[argv[i]] = argv[i + 1];
  auto get = [&](const char* k, const char* fallback) { return kv.count(k) ? kv[k] : std::string(fallback); };
  Flags f;
  f.redis_port = std::atoi(get("--redis-port", "0").c_str());
  f.password = get("--password", "");
  f.redis_host = get("--redis-host", "127.0.0.1");
  f.host = get("--host", "127.0.0.1");
  f.node = get("--node", "");
  f.transport = get("--transport", "auto");
  f.prefix = get("--prefix", "collective_rank");
  f.group = get("--group", "g");
  f.generation = std::atoll(get("--generation", "0").c_str());
  f.rank = std::atoi(get("--rank", "0").c_str());
  f.world = std::atoi(get("--world", "0").c_str());
  f.rounds = std::atoi(get("--rounds", "1").c_str());
  f.count = std::strtoull(get("--count", "1000").c_str(), nullptr, 10);
  f.value = static_cast<float>(std::atof(get("--value", std::to_string(f.rank + 1).c_str()).c_str()));
  f.timeout = std::chrono::milliseconds(std::atoi(get("--timeout-ms", "5000").c_str()));
  f.reform_rank = std::atoi(get("--reform-rank", "-1").c_str());
  f.reform_world = std::atoi(get("--reform-world", "0").c_str());
  const std::string dtype = get("--dtype", "f32");
  f.dtype = dtype == "f16" ? DType::f16 : dtype == "bf16" ? DType::bf16 : DType::f32;
  if (f.redis_port <= 0 || f.world <= 0)
    return invalid_argument("--redis-port and --world are required (see the usage in collective_rank_main.cc)");
  return f;
}

// One allreduce of `f.count` elements of f.value; ok with the (uniform) sum, else the error.
Expected<float> allreduce_once(Communicator& comm, const Flags& f) {
  std::vector<float> values(f.count, f.value);
  std::vector<uint16_t> half(f.count);
  void* buf = values.data();
  if (f.dtype != DType::f32) {
    for (size_t i = 0; i < f.count; ++i) half[i] = f.dtype == DType::f16 ? f32_to_f16(f.value) : f32_to_bf16(f.value);
    buf = half.data();
  }
  CollectiveOptions o;
  o.timeout = f.timeout;
  Status st = comm.allreduce(buf, buf, f.count, f.dtype, ReduceOp::sum, o);
  if (!st.ok()) return st;
  if (f.dtype != DType::f32)
    for (size_t i = 0; i < f.count; ++i) values[i] = f.dtype == DType::f16 ? f16_to_f32(half[i]) : bf16_to_f32(half[i]);
  for (size_t i = 1; i < f.count; ++i)
    if (values[i] != values[0]) return internal_error("element " + std::to_string(i) + " differs from element 0");
  return f.count ? values[0] : 0.0f;
}

Expected<std::unique_ptr<Communicator>> form(gcs::Store& store, const Flags& f, int64_t generation, int rank,
                                             int world) {
  GroupOptions o;
  o.name = f.group;
  o.generation = generation;
  o.rank = rank;
  o.world_size = world;
  o.host = f.host;
  o.transport = f.transport;
  o.node = NodeId::random();
  if (!f.node.empty()) {  // a label -> the same id in every process that is given it
    std::array<uint8_t, 16> bytes{};
    for (size_t i = 0; i < f.node.size(); ++i) bytes[i % 16] ^= static_cast<uint8_t>(f.node[i] + 1);
    bytes[15] ^= 0x5a;  // never nil
    o.node = NodeId::from_bytes(bytes);
  }
  o.actor = ActorId::random();
  o.timeout = std::chrono::seconds(20);
  return form_group(store, o);
}

std::string num(float x) { return std::to_string(static_cast<long long>(x)); }

}  // namespace

int main(int argc, char** argv) {
  auto flags = parse(argc, argv);
  if (!flags) {
    say("form error " + flags.status().to_string());
    return 2;
  }
  const Flags& f = *flags;
  gcs::RedisStoreOptions so;
  so.redis.host = f.redis_host;
  so.redis.port = f.redis_port;
  so.redis.password = f.password;
  so.prefix = f.prefix;
  auto store = gcs::RedisStore::connect(so);
  if (!store) {
    say("form error " + store.status().to_string());
    return 1;
  }
  auto comm = form(**store, f, f.generation, f.rank, f.world);
  if (!comm) {
    say("form error " + comm.status().to_string());
    return 1;
  }
  say("formed " + std::to_string(f.generation) + " " + std::to_string(f.rank) + " " + std::to_string(f.world) + " " +
      (*comm)->transport().kind());
  for (int k = 1; k <= f.rounds; ++k) {
    const auto start = std::chrono::steady_clock::now();
    auto sum = allreduce_once(**comm, f);
    if (sum) {
      say("round " + std::to_string(k) + " ok " + num(*sum));
      continue;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    say("round " + std::to_string(k) + " error " + std::to_string(ms.count()) + " " + sum.status().to_string());
    if (f.reform_rank < 0) return 1;
    // A survivor: record why the group stopped, then re-form without the missing member.
    Status recorded = record_group_failure(**store, f.group, f.generation, sum.status());
    if (!recorded.ok()) say("record error " + recorded.to_string());
    comm->reset();
    auto again = form(**store, f, f.generation + 1, f.reform_rank, f.reform_world);
    if (!again) {
      say("form error " + again.status().to_string());
      return 1;
    }
    say("reformed " + std::to_string(f.generation + 1) + " " + std::to_string(f.reform_rank) + " " +
        std::to_string(f.reform_world));
    auto final_sum = allreduce_once(**again, f);
    say(final_sum ? "final ok " + num(*final_sum) : "final error " + final_sum.status().to_string());
    return final_sum ? 0 : 1;
  }
  return 0;
}
