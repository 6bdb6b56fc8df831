#include "trainers/job/job_actors.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system.h"
#include "caf/all.hpp"
#include "trainers/job/job_worker.h"
#include "trainers/job/predict_worker.h"
#include "trainers/job/ps_member.h"

namespace troupe::job {
namespace {

using done_atom = caf::atom_constant<caf::atom("jobdone")>;

// How long a stopped job actor waits for a body that may be failing on its own (see the exit
// handler below); a healthy body is stopped this much later.
constexpr std::chrono::milliseconds kStopGrace{100};

using Body = std::function<Status(const actors::NodeEnvironment&, const MemberArgs&, const std::atomic<bool>&)>;

struct MemberState {
  std::atomic<bool> cancel{false};
  std::mutex mu;
  std::condition_variable finished_cv;
  bool finished = false;  // the body returned; with its error, if any (set by its thread)
  Status failure;
  std::shared_ptr<Interrupts> interrupts = std::make_shared<Interrupts>();
  std::thread thread;
  ~MemberState() {
    cancel = true;
    // A body blocked in a collective (a peer behind a cut link) leaves it now, not at its deadline.
    interrupts->interrupt_all(unavailable("stopped: the actor was stopped while in a collective"));
    if (thread.joinable()) thread.join();
  }
};

// The devices the node manager gave this actor, in the log ("worker 1 of job 3fa2c1d0 on GPU 0");
// a sync worker trains on the first (trainers/job/gpu_worker.h).
void log_devices(const actors::NodeEnvironment& env, const char* role, const MemberArgs& args) {
  if (!env.gpus || args.actor.nil()) return;
  const std::vector<int> devices = env.gpus->devices_of(args.actor);
  if (devices.empty()) return;
  std::string list;
  for (size_t i = 0; i < devices.size(); ++i) list += (i ? "," : "") + std::to_string(devices[i]);
  spdlog::info("{} {} of job {} on GPU{} {} (node {})", role, args.index, args.job.short_hex(),
               devices.size() == 1 ? "" : "s", list, env.node.short_hex());
}

caf::behavior member_actor(caf::stateful_actor<MemberState>* self, std::shared_ptr<actors::NodeEnvironmentSlot> slot,
                           const char* role, MemberArgs args, Body body) {
  actors::report_exceptions(self);
  caf::actor me = caf::actor_cast<caf::actor>(self);
  MemberState* state = &self->state;  // outlives the thread: its destructor joins it
  args.interrupts = self->state.interrupts;
  // A stop that overtakes the body's failure (the supervisor reacting to a peer that noticed it
  // first, while this body was still on its way out) must not hide it: the actor ends with the
  // body's error when the body failed, or fails within kStopGrace of the stop.
  self->set_exit_handler([self, state](caf::exit_msg& m) {
    if (!m.reason) return;
    std::unique_lock<std::mutex> lock(state->mu);
    state->finished_cv.wait_for(lock, kStopGrace, [state] { return state->finished; });
    const Status failed = state->failure;
    lock.unlock();
    self->quit(failed.ok() ? m.reason : actors::to_error(failed));
  });
  self->state.thread = std::thread([me, slot, role, args, body, state]() mutable {
    Status st;
    auto env = slot->wait(std::chrono::seconds(10));
    if (!env.ok()) {
      st = env.status();
    } else {
      log_devices(*env, role, args);
      try {
        st = body(*env, args, state->cancel);
      } catch (const std::exception& e) {
        st = internal_error(std::string("uncaught exception: ") + e.what());
      }
    }
    if (!st.ok()) spdlog::error("job {} actor {}: {}", args.job.short_hex(), args.index, st.to_string());
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->finished = true;
      state->failure = st;
    }
    state->finished_cv.notify_all();
    caf::anon_send(me, done_atom::value, static_cast<int32_t>(st.code()), st.message());
    me = nullptr;  // do not keep the actor alive
  });
  return {
      [self](done_atom, int32_t code, const std::string& message) {
        if (code == 0) {
          self->quit();
        } else {
          self->quit(actors::to_error(Status(static_cast<Code>(code), message)));
        }
      },
  };
}

// `role` names the actor in logs; a string literal.
actors::ActorFactory member_factory(std::shared_ptr<actors::NodeEnvironmentSlot> env, const char* role, Body body) {
  return [env, role, body](caf::actor_system& sys, const std::vector<std::string>& args) -> Expected<caf::actor> {
    auto parsed = parse_member_args(args);
    if (!parsed.ok()) return parsed.status();
    return sys.spawn<caf::detached>(member_actor, env, role, *parsed, body);
  };
}

}  // namespace

Status add_job_actor_types(actors::Registry& registry, std::shared_ptr<actors::NodeEnvironmentSlot> env) {
  TROUPE_RETURN_IF_ERROR(registry.add(kWorkerActorType, member_factory(env, "worker", run_worker)));
  TROUPE_RETURN_IF_ERROR(registry.add(kServerActorType, member_factory(env, "parameter server", run_server)));
  return registry.add(kPredictorActorType, member_factory(env, "predictor", run_predictor));
}

}  // namespace troupe::job
