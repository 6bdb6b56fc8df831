// The head's job supervisor: it places a job's actors as one gang, keeps a job that does not fit
// PENDING (with the scheduler's reason, retried every second), records RUNNING once every actor
// started, and watches the actors: one that fails (an error exit, an exception, its node lost)
// fails the job, naming the actor, its role and the cause, and the others are stopped; once every
// worker ended normally the job's servers are stopped. `troupe stop` cancels a job. The job's rank-0
// worker records SUCCEEDED itself with the result (trainers/job/).
//
// It lives inside the head service actor (actors/head_service.cc), which hands it the actors'
// exits (down messages) and lends it placement and the node managers through JobHost. Restarting
// failed actors is the fault-tolerance layer's job; today a failure ends the job.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "actors/head_messages.h"
#include "caf/actor.hpp"
#include "caf/actor_addr.hpp"
#include "caf/error.hpp"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::actors {

// One actor to place for a job, as the head service's placement takes it.
struct PlacementAsk {
  ActorId id;
  JobActor actor;
};
// What placement did: every actor started (with its handle and node), or none and why.
struct PlacementOutcome {
  bool started = false;
  std::string pending_reason;
  std::map<ActorId, caf::actor> handles;
  std::map<ActorId, NodeId> nodes;
};

struct JobHost {
  gcs::Store* store = nullptr;
  // Places and starts `asks` as gang `gang`, all or none (records the actors in the GCS).
  std::function<Expected<PlacementOutcome>(const std::vector<PlacementAsk>& asks, const std::string& gang,
                                           const std::string& policy, const JobId& job)>
      place;
  std::function<void(const caf::actor&)> monitor;
  // Asks the node manager of `node` to stop actor `id`.
  std::function<Status(const NodeId& node, const ActorId& id, const std::string& reason)> stop;
  // Gives the resources of an actor that ended back to its node.
  std::function<void(const NodeId& node, const gcs::Resources& demand)> release;
};

class JobSupervisor {
 public:
  explicit JobSupervisor(JobHost host) : host_(std::move(host)) {}

  Expected<SubmitJobReply> submit(const SubmitJob& request);
  Expected<StopJobReply> stop(const StopJob& request);
  // Retries the placement of PENDING jobs; returns true while some are still pending.
  bool retry_pending();
  // A monitored actor exited; false when it was not one of a job's.
  bool on_down(const caf::actor_addr& source, const caf::error& reason, const std::string& reason_text);

 private:
  struct Member {
    ActorId id;
    NodeId node;
    JobActor actor;
    caf::actor handle;
    bool running = true;
  };
  struct Job {
    JobId id;
    std::string policy;
    std::vector<PlacementAsk> asks;
    std::vector<Member> members;  // empty while PENDING
    bool ending = false;          // failed or cancelled: the rest are being stopped
  };
  Status try_start(Job& job, SubmitJobReply* reply);
  void stop_members(Job& job, const std::string& reason, bool servers_only);
  void end_job(Job& job, gcs::JobState state, const std::string& message);

  JobHost host_;
  std::map<JobId, Job> jobs_;               // pending or running
  std::map<caf::actor_addr, JobId> by_addr_;
};

bool is_server_actor(const JobActor& a);  // a job's parameter server (type "troupe.ps")

}  // namespace troupe::actors
