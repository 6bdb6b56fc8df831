// How a stopped job actor leaves the collectives it waits in. The actor's body runs on its own
// thread (trainers/job/job_actors.cc) and may be blocked in a collective whose peer is gone (a
// cut link: the peer's process lives on, unreachable); setting the cancel flag alone would leave
// it there until the collective's deadline. The body registers each group's transport here while
// it uses it; stopping the actor interrupts every registered transport (Transport::interrupt), and
// one registered after the stop is interrupted at once.
#pragma once

#include <mutex>
#include <set>

#include "collectives/transport.h"
#include "core/status.h"

namespace troupe::job {

class Interrupts {
 public:
  // Keeps `t` registered until destroyed (destroy it before the transport).
  class Registration {
   public:
    Registration() = default;
    Registration(Interrupts* owner, collectives::Transport* t) : owner_(owner), t_(t) {}
    Registration(Registration&& o) noexcept : owner_(o.owner_), t_(o.t_) { o.owner_ = nullptr; }
    Registration& operator=(Registration&& o) noexcept {
      if (this != &o) {
        if (owner_) owner_->remove(t_);
        owner_ = o.owner_;
        t_ = o.t_;
        o.owner_ = nullptr;
      }
      return *this;
    }
    Registration(const Registration&) = delete;
    ~Registration() {
      if (owner_) owner_->remove(t_);
    }

   private:
    Interrupts* owner_ = nullptr;
    collectives::Transport* t_ = nullptr;
  };

  // `t` may be null (a group the body does not have): nothing is registered.
  Registration add(collectives::Transport* t) {
    if (!t) return {};
    std::lock_guard<std::mutex> lock(mu_);
    if (!why_.ok()) t->interrupt(why_);
    live_.insert(t);
    return Registration(this, t);
  }

  // Interrupts every registered transport and any registered later with `why` (not ok).
  void interrupt_all(const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!why_.ok()) return;
    why_ = why;
    for (collectives::Transport* t : live_) t->interrupt(why);
  }

 private:
  void remove(collectives::Transport* t) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(t);
  }

  std::mutex mu_;
  std::set<collectives::Transport*> live_;
  Status why_;  // ok until interrupt_all
};

}  // namespace troupe::job
