// bench_actors: messaging between two troupe node processes on this machine, through troupe's
// node-manager path and through raw CAF, in the same invocation and with both scheduler policies.
//
//   build/bin/bench_actors                         # both policies, default sizes
//   build/bin/bench_actors --policy sharing --sync 5000 --async 200000 --spawn 10000
//
// The parent starts a child (this binary re-executed with --serve POLICY) that runs a node actor
// system: troupe's node manager published on one port, and raw CAF actors (string echo, int64
// counter) published on another. Per policy the parent measures, each case --reps times (median):
//   sync   sequential request/response round trips: raw CAF (std::string) vs troupe Call to an echo
//          actor spawned through the node manager, and troupe CallBatch (items per second);
//   async  one-way messages then one request that returns the count: raw CAF int64 sends vs troupe
//          Cast to a counter spawned through the node manager, and troupe CastBatch (items/s);
//   spawn  actors created per second by SpawnBatchRequest through the node manager.
// Every reply is checked (echo payloads, final counts, spawned actors answering); a wrong result
// fails the run. Each driver is an event-based actor, the way hot paths in troupe message actors.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/actor_system.h"
#include "actors/messages.h"
#include "actors/node_manager_actor.h"
#include "actors/node_manager_client.h"
#include "bench/bench_common.h"
#include "caf/all.hpp"
#include "caf/io/middleman.hpp"

extern char** environ;

using namespace troupe;
using namespace troupe::actors;
using troupe::bench::Clock;

namespace {

constexpr auto kTimeout = std::chrono::seconds(30);
const std::string kPayload = "0123456789abcdef";

// -- the node process -------------------------------------------------------------------------------

caf::behavior raw_echo(caf::event_based_actor*) {
  return {[](const std::string& s) { return s; }};
}

caf::behavior raw_counter(caf::stateful_actor<int64_t>* self) {
  return {[self](int64_t n) { self->state += n; },
          [self](caf::get_atom) { return self->state; }};
}

// Serves until stdin closes: prints "<node manager port> <raw echo port> <raw counter port>".
int serve(const std::string& policy) {
  ActorSystemOptions opts;
  opts.scheduler_policy = policy;
  auto sys = ActorSystem::start(opts);
  if (!sys) return std::fprintf(stderr, "%s\n", sys.status().to_string().c_str()), 1;
  auto& s = (*sys)->system();
  auto nm_port = (*sys)->publish(spawn_node_manager(s, {}));
  auto echo = s.spawn(raw_echo);
  auto counter = s.spawn(raw_counter);
  (*sys)->track(echo);
  (*sys)->track(counter);
  auto echo_port = s.middleman().publish(echo, 0, "127.0.0.1");
  auto counter_port = s.middleman().publish(counter, 0, "127.0.0.1");
  if (!nm_port || !echo_port || !counter_port) return std::fprintf(stderr, "publish failed\n"), 1;
  std::printf("%u %u %u\n", unsigned(*nm_port), unsigned(*echo_port), unsigned(*counter_port));
  std::fflush(stdout);
  char buf[64];
  while (::read(0, buf, sizeof buf) > 0) continue;
  return 0;
}

// The child node process (RAII): closing its stdin stops it; killed if it lingers.
class NodeProcess {
 public:
  NodeProcess(const std::string& self_exe, const std::string& policy) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::vector<std::string> args{self_exe, "--serve", policy};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, self_exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    if (rc != 0) throw std::runtime_error("cannot start node process " + self_exe);
  }
  ~NodeProcess() {
    ::close(to_child_);
    ::close(from_child_);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      ::usleep(50 * 1000);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // The ports line, waiting at most 20 s.
  std::vector<uint16_t> ports() {
    std::string line;
    pollfd p{from_child_, POLLIN, 0};
    char c;
    while (line.find('\n') == std::string::npos) {
      if (::poll(&p, 1, 20000) <= 0 || ::read(from_child_, &c, 1) != 1) {
        throw std::runtime_error("node process did not report its ports within 20 s");
      }
      line += c;
    }
    unsigned a = 0, b = 0, d = 0;
    if (std::sscanf(line.c_str(), "%u %u %u", &a, &b, &d) != 3) throw std::runtime_error(line);
    return {uint16_t(a), uint16_t(b), uint16_t(d)};
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
};

// -- drivers -----------------------------------------------------------------------------------------

struct Outcome {
  double seconds = 0;
  bool ok = false;
  std::string error;
};
using Done = std::shared_ptr<std::promise<Outcome>>;

// `n` sequential requests of `req`; each reply must satisfy `check`.
template <class Rep, class Req, class Check>
void sync_step(caf::event_based_actor* self, caf::actor target, Req req, Check check, size_t left,
               Clock::time_point t0, Done done) {
  self->request(target, kTimeout, req)
      .then(
          [=](Rep& rep) {
            if (!check(rep)) {
              done->set_value({0, false, "wrong reply"});
              self->quit();
            } else if (left == 1) {
              done->set_value({bench::seconds_since(t0), true, ""});
              self->quit();
            } else {
              sync_step<Rep>(self, target, req, check, left - 1, t0, done);
            }
          },
          [=](caf::error& e) {
            done->set_value({0, false, self->system().render(e)});
            self->quit();
          });
}

template <class Rep, class Req, class Check>
Outcome run_sync(caf::actor_system& sys, caf::actor target, Req req, Check check, size_t n) {
  auto done = std::make_shared<std::promise<Outcome>>();
  auto fut = done->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    sync_step<Rep>(self, target, req, check, n, Clock::now(), done);
  });
  return fut.get();
}

// `n` one-way messages `msg`, then `get`, whose reply must satisfy `check`.
template <class Rep, class Msg, class Get, class Check>
Outcome run_async(caf::actor_system& sys, caf::actor target, Msg msg, size_t n, Get get,
                  Check check) {
  auto done = std::make_shared<std::promise<Outcome>>();
  auto fut = done->get_future();
  sys.spawn([=](caf::event_based_actor* self) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < n; ++i) self->send(target, msg);
    self->request(target, kTimeout, get)
        .then(
            [=](Rep& rep) {
              done->set_value({bench::seconds_since(t0), check(rep), check(rep) ? "" : "bad count"});
              self->quit();
            },
            [=](caf::error& e) {
              done->set_value({0, false, self->system().render(e)});
              self->quit();
            });
  });
  return fut.get();
}

// -- the table ---------------------------------------------------------------------------------------

struct Row {
  std::string policy, kind, name;
  double items = 0;      // items per repetition
  double seconds = 0;    // median
  double baseline = 0;   // items/s of the raw CAF case to compare with (0: none)
};

bool g_failed = false;

struct Case {
  std::string name;
  double items = 0;  // items per repetition
  std::function<Outcome()> once;
};

// Runs the cases interleaved (rep 1 of each, rep 2 of each, ...) so that load from elsewhere on the
// machine hits them alike; the first case is the raw CAF baseline of the others when `compare`.
void measure(const std::string& policy, const std::string& kind, const std::vector<Case>& cases,
             int reps, bool compare, std::vector<Row>* rows) {
  std::vector<std::vector<double>> secs(cases.size());
  std::vector<bool> failed(cases.size(), false);
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (failed[i]) continue;
      Outcome o = cases[i].once();
      if (!o.ok) {
        std::fprintf(stderr, "FAILED %s %s %s: %s\n", policy.c_str(), kind.c_str(),
                     cases[i].name.c_str(), o.error.c_str());
        g_failed = true;
        failed[i] = true;
      }
      secs[i].push_back(o.seconds);
    }
  }
  double base = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    Row row{policy, kind, cases[i].name, cases[i].items, failed[i] ? 0 : bench::median(secs[i]), 0};
    if (compare && i == 0 && row.seconds > 0) base = row.items / row.seconds;
    if (compare && i > 0) row.baseline = base;
    rows->push_back(row);
  }
}

void print(const std::vector<Row>& rows) {
  std::printf("\n%-9s %-6s %-30s %9s %9s %12s %10s %8s\n", "policy", "kind", "case", "items",
              "median_s", "items/s", "us/item", "vs raw");
  for (const Row& r : rows) {
    const double rate = r.seconds > 0 ? r.items / r.seconds : 0;
    char ratio[32] = "-";
    if (r.baseline > 0 && rate > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", rate / r.baseline);
    std::printf("%-9s %-6s %-30s %9.0f %9.4f %12.0f %10.2f %8s\n", r.policy.c_str(), r.kind.c_str(),
                r.name.c_str(), r.items, r.seconds, rate, rate > 0 ? 1e6 / rate : 0, ratio);
  }
}

struct Sizes {
  size_t sync = 3000, async = 200000, spawn = 10000, call_batch = 64, cast_batch = 256;
  size_t spawn_batch = 1000;
  int reps = 3;
};

void run_policy(const std::string& exe, const std::string& policy, const Sizes& z,
                std::vector<Row>* rows) {
  NodeProcess node(exe, policy);
  const std::vector<uint16_t> ports = node.ports();
  ActorSystemOptions opts;
  opts.scheduler_policy = policy;
  auto head = ActorSystem::start(opts);
  if (!head) throw std::runtime_error(head.status().to_string());
  caf::actor_system& sys = (*head)->system();
  auto nm_handle = (*head)->connect("127.0.0.1", ports[0], std::chrono::seconds(5));
  if (!nm_handle) throw std::runtime_error(nm_handle.status().to_string());
  NodeManagerClient nm(sys, *nm_handle, kTimeout);
  // Raw CAF: the blocking remote_actor, as a CAF program would do it.
  auto raw_echo_h = sys.middleman().remote_actor("127.0.0.1", ports[1]);
  auto raw_counter_h = sys.middleman().remote_actor("127.0.0.1", ports[2]);
  auto echo = nm.spawn(spawn_request("echo"));
  if (!raw_echo_h || !raw_counter_h || !echo) throw std::runtime_error("setup failed");

  // sync
  CallBatch cb;
  cb.items.assign(z.call_batch, Call{"echo", kPayload});
  const size_t cb_n = std::max<size_t>(1, z.sync / z.call_batch * 4);
  measure(policy, "sync",
          {{"raw CAF request(string)", double(z.sync),
            [&] {
              return run_sync<std::string>(sys, *raw_echo_h, kPayload,
                                           [](const std::string& s) { return s == kPayload; },
                                           z.sync);
            }},
           {"troupe Call", double(z.sync),
            [&] {
              return run_sync<CallReply>(sys, echo->handle, Call{"echo", kPayload},
                                         [](const CallReply& r) { return r.payload == kPayload; },
                                         z.sync);
            }},
           {"troupe CallBatch(" + std::to_string(z.call_batch) + ")", double(cb_n * z.call_batch),
            [&] {
              return run_sync<CallBatchReply>(
                  sys, echo->handle, cb,
                  [&](const CallBatchReply& r) {
                    return r.items.size() == z.call_batch && r.items.back().payload == kPayload;
                  },
                  cb_n);
            }}},
          z.reps, true, rows);

  // async. Raw: one counter for all repetitions, so repetition r must leave it at r * n.
  // troupe: a fresh counter per repetition, spawned and stopped through the node manager.
  size_t raw_reps = 0;
  auto troupe_async = [&](auto msg, size_t msgs, size_t per_msg) {
    return [&, msg, msgs, per_msg] {
      auto counter = nm.spawn(spawn_request("counter"));
      if (!counter) return Outcome{0, false, counter.status().to_string()};
      const std::string want = std::to_string(msgs * per_msg);
      Outcome o = run_async<CallReply>(sys, counter->handle, msg, msgs, Call{"get", ""},
                                       [want](const CallReply& r) { return r.payload == want; });
      (void)nm.stop(*ActorId::from_hex(counter->actor_id), "bench case done");
      return o;
    };
  };
  CastBatch casts;
  casts.items.assign(z.cast_batch, Cast{"add", ""});
  const size_t cast_msgs = std::max<size_t>(1, z.async / z.cast_batch);
  measure(policy, "async",
          {{"raw CAF send(int64)", double(z.async),
            [&] {
              const int64_t want = int64_t(z.async) * int64_t(++raw_reps);
              return run_async<int64_t>(sys, *raw_counter_h, int64_t{1}, z.async,
                                        caf::get_atom::value,
                                        [want](int64_t v) { return v == want; });
            }},
           {"troupe Cast", double(z.async), troupe_async(Cast{"add", ""}, z.async, 1)},
           {"troupe CastBatch(" + std::to_string(z.cast_batch) + ")",
            double(cast_msgs * z.cast_batch), troupe_async(casts, cast_msgs, z.cast_batch)}},
          z.reps, true, rows);

  // spawn: batches through the node manager; every 100th actor must answer
  measure(policy, "spawn", {{"troupe SpawnBatch(" + std::to_string(z.spawn_batch) + ")",
                             double(z.spawn), [&] {
    const auto t0 = Clock::now();
    std::vector<SpawnReply> all;
    for (size_t done = 0; done < z.spawn; done += z.spawn_batch) {
      const size_t k = std::min(z.spawn_batch, z.spawn - done);
      auto r = nm.spawn_batch(std::vector<SpawnRequest>(k, spawn_request("echo")));
      if (!r) return Outcome{0, false, r.status().to_string()};
      all.insert(all.end(), r->begin(), r->end());
    }
    const double secs = bench::seconds_since(t0);
    for (size_t i = 0; i < all.size(); i += 100) {
      auto r = actors::call(sys, all[i].handle, Call{"echo", all[i].actor_id}, kTimeout);
      if (!r || r->payload != all[i].actor_id) return Outcome{0, false, "spawned actor silent"};
    }
    return Outcome{secs, all.size() == z.spawn, "wrong number of actors"};
  }}}, 1, false, rows);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe actor messaging between two node processes vs raw CAF"};
  std::string serve_policy, policy = "both";
  Sizes z;
  app.add_option("--serve", serve_policy, "internal: run as the node process with this policy");
  app.add_option("--policy", policy, "stealing, sharing or both")
      ->check(CLI::IsMember({"stealing", "sharing", "both"}));
  app.add_option("--sync", z.sync, "sequential round trips per repetition");
  app.add_option("--async", z.async, "one-way messages per repetition");
  app.add_option("--spawn", z.spawn, "actors to create");
  app.add_option("--cast-batch", z.cast_batch, "casts per CastBatch");
  app.add_option("--call-batch", z.call_batch, "calls per CallBatch");
  app.add_option("--reps", z.reps, "repetitions per case (median reported)");
  CLI11_PARSE(app, argc, argv);
  if (!serve_policy.empty()) return serve(serve_policy);

  std::printf("# %s\n# cpu: %s, %u hardware threads\n", bench::command_line(argc, argv).c_str(),
              bench::cpu_model().c_str(), std::thread::hardware_concurrency());
  char exe_buf[4096];
  const ssize_t len = ::readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
  const std::string exe = len > 0 ? std::string(exe_buf, size_t(len)) : std::string(argv[0]);
  std::vector<Row> rows;
  for (const std::string p : {"stealing", "sharing"}) {
    if (policy != "both" && policy != p) continue;
    try {
      run_policy(exe, p, z, &rows);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FAILED policy %s: %s\n", p.c_str(), e.what());
      g_failed = true;
    }
  }
  print(rows);
  if (g_failed) std::printf("\nSOME CASES FAILED (see stderr)\n");
  return g_failed ? 1 : 0;
}
