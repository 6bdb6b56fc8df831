// One request/response from non-actor code (a process's main loop, a client), with a deadline:
// the reply, or a Status naming `what` (a refusal keeps its troupe code; no reply in time is
// `timeout`). Runs a short-lived scoped actor: for control-plane traffic, not hot loops.
#pragma once

#include <chrono>
#include <string>
#include <utility>

#include "actors/actor_system.h"
#include "caf/actor.hpp"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "core/status.h"

namespace troupe::actors {

template <class Reply, class Request>
Expected<Reply> request_blocking(caf::actor_system& sys, const caf::actor& dest, std::chrono::milliseconds timeout,
                                 Request msg, const std::string& what) {
  if (!dest) return invalid_argument(what + ": the actor handle is invalid (not connected?)");
  Expected<Reply> result = internal_error(what + ": no reply and no error");
  caf::scoped_actor self{sys};
  self->request(dest, timeout, std::move(msg))
      .receive([&](Reply& reply) { result = std::move(reply); },
               [&](caf::error& err) {
                 Status st = to_status(sys, err, what);
                 if (st.code() == Code::timeout) {
                   st = Status(Code::timeout, st.message() + " (no reply within " + format_duration(timeout) + ")");
                 }
                 result = st;
               });
  return result;
}

}  // namespace troupe::actors
