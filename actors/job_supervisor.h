// The head's job supervisor: it places a job's actors as one gang, keeps a job that does not fit
// PENDING (with the scheduler's reason, retried every second), records RUNNING once every actor
// started, and watches the actors: one that fails (an error exit, an exception, its node lost)
// fails the job, naming the actor, its role and the cause, and the others are stopped; once every
// worker ended normally the job's servers are stopped. `troupe stop` cancels a job. The job's rank-0
// worker records SUCCEEDED itself with the result (trainers/job/).
//
// Supervision (actors/job_restarts.cc): an actor that fails (an error exit, an exception, its node
// process killed or its node declared DEAD by the failure detector) is restarted within the job's
// budget (SubmitJob::max_restarts, with backoff). A job of one gang (sync, central) restarts whole:
// the other actors are stopped, and once every one is down the gang is placed again, its workers
// resuming from the job's newest intact checkpoint (trainers/job/). An async job replaces only the
// failed actor; the others keep training. A failed parameter server of an async job is replaced
// only when the job checkpoints (SubmitJob::restore_servers: the replacement restores its shard
// from the newest checkpoint, and the workers reconnect to it); otherwise it fails the job. A spent budget fails the job naming the last failure.
// Each actor learns its attempt (0, 1, ...) from its second-to-last argument.
//
// Elastic sync jobs (SubmitJob::elastic; actors/job_elastic.cc): a restart places as many of the
// workers as fit now (the first k slots, k >= 1; every worker is told k in its arguments) instead
// of waiting for room for all, and records "job_resized". While it runs smaller, the supervisor
// watches (every second, with check_progress) for room for the missing workers; once there is
// room and the job has written a checkpoint since, the gang restarts at full size from that
// checkpoint ("job_resized", grows back). A grow-back spends no restart of the budget; a job without
// checkpoints does not grow back (it would start over). A first placement waits for room for all.
// A live elastic job (trainers/job/live_recovery.h) instead keeps its survivors: a lost worker
// with no room for a replacement is dropped, and the survivors re-form without it at the next
// generation, renumbered by the generation's plan (gcs/group_plan.h), from their own memory; when
// room returns the missing workers join at a new generation and take the state from a survivor.
//
//   RUNNING(N) --worker fails--> restarting --room for k < N--> RUNNING(k)
//   RUNNING(k) --room for N, then a new checkpoint--> restarting --> RUNNING(N)
//
// It lives inside the head service actor (actors/head_service.cc), which hands it the actors'
// exits (down messages) and the nodes declared DEAD, and lends it placement and the node managers
// through JobHost.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
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
  std::optional<NodeId> pin;    // only on this node (a restart "on the same node")
  std::optional<NodeId> avoid;  // anywhere but this node (a restart "on another node")
};
// What placement did: every actor started (with its handle and node), or none and why.
struct PlacementOutcome {
  bool started = false;
  bool undone = false;  // part of the gang started and was stopped again: ask again under new ids
  std::string pending_reason;
  std::map<ActorId, caf::actor> handles;
  std::map<ActorId, NodeId> nodes;
  std::vector<Status> node_failures;  // nodes that refused or did not answer their part (timeout)
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
  // Whether `asks` could be placed now beside what already runs (a dry run: nothing is recorded or
  // started). Elastic jobs size their restarts with it; unset: they always ask for every worker.
  std::function<bool(const std::vector<PlacementAsk>& asks, const std::string& policy)> fits;
};

class JobSupervisor {
 public:
  explicit JobSupervisor(JobHost host) : host_(std::move(host)) {}

  Expected<SubmitJobReply> submit(const SubmitJob& request);
  Expected<StopJobReply> stop(const StopJob& request);
  // Retries the placement of PENDING jobs; returns true while some are still pending.
  bool retry_pending();
  // A monitored actor exited; false when it was not one of a job's. An exit whose reason the head
  // did not see (CAF's exit_reason::unknown: the actor ended before the head's watch reached its
  // node, as a worker failing in its first milliseconds does) takes its reason from the DEAD record
  // its node manager writes (actors/job_exits.cc): at once when it is there, else by explain_exits.
  bool on_down(const caf::actor_addr& source, const caf::error& reason, const std::string& reason_text);
  // Reads the records of the exits still unexplained again; one whose record has not come within
  // the grace (set_exit_reason_grace, 5 s) fails naming that. true while some are left (the head
  // calls it every 100 ms until then).
  bool explain_exits();
  bool unexplained_exits() const { return !unexplained_.empty(); }
  void set_exit_reason_grace(std::chrono::milliseconds grace) { exit_reason_grace_ = grace; }
  // The node is gone (its connection dropped, or the failure detector declared it DEAD): every job
  // actor there failed, whether or not its down message ever arrives.
  void on_node_dead(const NodeId& node, const std::string& reason);
  // Whether job `id` is supervised here (pending, running or between attempts).
  bool supervises(const JobId& id) const { return jobs_.count(id) > 0; }
  // true while some job waits to be restarted (the head then retries more often than for PENDING).
  bool restarting() const;
  // Restarts every running gang job whose step count stood still for its progress timeout (the
  // head calls it every second).
  void check_progress();

  // A restarted head takes over a job its predecessor supervised (actors/job_adoption.cc): the job
  // as submitted (saved by submit: actors/job_submissions.h), the attempt it is in, and its current
  // actors slot by slot — each with its handle when it is still alive (it is monitored from now on),
  // else why it was lost while no head watched. No members: the job was still PENDING. A lost
  // member counts as a failure (the restart policy applies).
  struct AdoptedMember {
    ActorId id;
    NodeId node;
    caf::actor handle;         // null: lost
    std::string lost_reason;
  };
  void adopt(const SubmitJob& submission, int attempt, const std::vector<AdoptedMember>& members);

  // The GCS lost its data (actors/job_gcs_loss.cc): every job's submission is written back; a job
  // still waiting for its first placement keeps waiting (its record written back as it was). A
  // sync, central or pipeline job that ran (or was between attempts) with checkpoints restarts from
  // them: their manifests, the trained ranges and the finished epochs of the ledger are written back
  // from the mirrors in its checkpoint directory (gcs/checkpoint_restore.h; event
  // "checkpoints_restored"), and the gang is placed again as after a failure (one restart of the
  // budget, "job_restarting" naming the loss and the step; a restart already under way — a worker
  // met the empty ledger first — finds them instead). Every other job — no checkpoints, none
  // usable, an async job, no restarts left — is FAILED naming the lost GCS and why it cannot resume,
  // and its actors are stopped. Never trains on silently.
  void on_gcs_lost(const std::string& what);
  // Fills in what the supervisor knows of a job actor's record (job, demand, restarts): false when
  // `id` is no member of a job.
  bool fill_member_record(const ActorId& id, gcs::ActorRecord* record) const;

 private:
  struct Member {
    ActorId id;
    NodeId node;
    JobActor actor;
    caf::actor handle;
    bool running = true;
    size_t slot = 0;              // index into Job::actors
  };
  struct Job {
    JobId id;
    std::string policy;
    std::vector<JobActor> actors; // as submitted (no attempt or id arguments)
    std::vector<PlacementAsk> asks;
    std::vector<Member> members;  // empty while PENDING
    bool ending = false;          // failed or cancelled: the rest are being stopped
    // supervision
    int max_restarts = 0;
    int64_t backoff_ms = 0;
    bool whole_gang = true;
    bool live = false;            // a live sync job: replaced slot by slot, but restarted whole when stuck
    bool restore_servers = false; // not a whole gang: a failed server is replaced (it restores its shard)
    int attempt = 0;              // restarts begun so far
    // The backoff doubles with each failure that comes before the job got past the step the one
    // before it failed at (a crash loop), and starts over once it did: a job that loses a node now
    // and then waits the base backoff each time, not the 30 s its tenth restart would.
    int failure_streak = 0;
    int64_t streak_step = -1;     // the most steps the job had done at one of its failures
    bool restarting = false;      // whole gang: the failed attempt's actors are being stopped
    int64_t restart_due_ms = 0;   // no placement of the next attempt before this
    int64_t stop_grace_ms = 0;    // whole gang: actors not down by then are left behind (hung in a
                                  // collective with a peer behind a cut link) and the gang goes on
    std::vector<size_t> replace;  // single-actor restarts: slots waiting for a new actor
    // The id of each waiting slot's replacement, kept across its placement retries: one PENDING
    // record per replaced actor however long it waits for room (actors/job_pending.cc).
    std::map<size_t, ActorId> replacement_ids;
    int64_t progress_timeout_ms = 0;
    int64_t last_step = -1;       // the job's step count when last seen to move
    int64_t last_move_ms = 0;     // when (or when this attempt started)
    // elastic (actors/job_elastic.cc)
    bool elastic = false;
    int size = 0;                 // workers the current attempt places (the first `size` slots)
    int ran_size = 0;             // workers the last started attempt ran with
    int free_attempts = 0;        // grow-backs: attempts that spent no restart of the budget
    int64_t grow_after_step = -1; // room for all seen: grow back after a checkpoint newer than this
    int planned_attempt = -1;     // live: the attempt whose generation plan_live_generation wrote
    // Where restarts go (SubmitJob::restart_on), and for the restart under way, by slot: the node
    // an actor must go back to ("same") or must not ("other").
    std::string restart_on = "any";
    std::map<size_t, NodeId> pins, avoids;
    // What a GCS that lost its data gets back (on_gcs_lost): the submission, and the job's record
    // as last read or written here.
    SubmitJob submission;
    std::optional<gcs::JobRecord> record;
  };
  static Job make_job(const JobId& id, const SubmitJob& request);  // as submitted, no attempt yet
  // Whether some member still runs (a job between attempts has none: no exit will come to forget it).
  static bool any_running(const Job& job);
  Status try_start(Job& job, SubmitJobReply* reply);
  void stop_members(Job& job, const std::string& reason, bool servers_only);
  void end_job(Job& job, gcs::JobState state, const std::string& message);
  // job_restarts.cc: the ask for `slot` of the current attempt, under `id` (a fresh one when nil).
  PlacementAsk make_ask(const Job& job, size_t slot, const ActorId& id = ActorId()) const;
  void member_exited(Job& job, Member& member, bool failed, const std::string& why);
  // job_exits.cc: `member`'s exit with the reason on its DEAD record, or, when `give_up`, with none;
  // false when the record does not say yet (nothing done).
  bool explain_exit(Job& job, Member& member, bool give_up);
  // The restart policy's answer to members that failed together, for one reason (an actor's exit;
  // every actor of a dead node; what a restarted head found lost): one failure of the job, so one
  // restart of the budget however many actors it took. An async job replaces them all, its servers
  // first (its workers wait for them: trainers/ps/ps_client.h), or fails when a server cannot be
  // restored.
  using Failed = std::vector<const Member*>;
  void members_failed(Job& job, const Failed& failed, const std::string& why);
  // After a member is down: the gang placed again, the servers stopped, or the job forgotten.
  void after_exit(Job& job);
  // `whole`: every actor stopped and the gang placed again (else only the failed slots replaced).
  void begin_restart(Job& job, const Failed& failed, const std::string& why, bool whole);
  std::string choose_restart_nodes(Job& job, const Failed& failed);
  void place_gang_again(Job& job);
  bool try_replace(Job& job);
  // More actors of a job lost while its last restart still has replacements to place: they join it.
  void join_restart(Job& job, const Failed& failed, const std::string& cause);
  void after_success(Job& job);
  // job_gcs_loss.cc: writes `job`'s checkpoints back from disk and restarts it from them (its record
  // `rec` written back RUNNING); "" when it does, else why it cannot.
  std::string resume_after_gcs_loss(Job& job, gcs::JobRecord& rec, const std::string& what);
  void account_async(Job& job, const std::string& result);  // after_success of an async job
  bool restarts_left(const Job& job) const { return job.attempt - job.free_attempts < job.max_restarts; }
  // job_pending.cc: the PENDING records of actors that will never be placed — asks replaced by
  // new ones, a job's that ended or was cancelled while they waited — recorded DEAD ("never
  // placed: why"), so a job's PENDING records are its actors waiting for room, one each.
  void retire_unplaced(const std::vector<PlacementAsk>& asks, const std::string& why);
  // Every PENDING record of job `id` retired (a catch-all when the job is forgotten).
  void retire_job_pending(const JobId& id, const std::string& why);
  // Forgets job `id` (no longer supervised), retiring what of it still waits for room.
  void forget_job(JobId id, const std::string& why);
  // The ask a waiting replacement of `slot` is placed with: its kept id, its slot's pins.
  PlacementAsk replacement_ask(Job& job, size_t slot);
  // job_elastic.cc
  Status start_attempt(Job& job);  // try_start, an elastic restart sized to what fits
  void check_grow_back();
  void grow_back(Job& job, int64_t checkpoint_step);
  // A live elastic job (job.live and job.elastic), once per attempt before its replacements are
  // placed: those that fit now stay in job.replace, the others are dropped (the survivors go on
  // without them), and the generation's plan (gcs/group_plan.h) gives every worker its rank.
  void plan_live_generation(Job& job);
  // A live elastic job running smaller with room again for `missing`: they join at a new attempt
  // (not charged to the budget); the survivors go on from their memory at their new ranks.
  void grow_back_live(Job& job, const std::vector<size_t>& missing);

  JobHost host_;
  std::map<JobId, Job> jobs_;               // pending or running
  std::map<caf::actor_addr, JobId> by_addr_;
  std::set<NodeId> dead_nodes_;             // gone: no restart is pinned there
  struct Unexplained {
    JobId job;
    ActorId actor;
    int64_t give_up_ms = 0;
  };
  std::vector<Unexplained> unexplained_;    // exits seen without their reason (on_down)
  std::chrono::milliseconds exit_reason_grace_{5000};
};

bool is_server_actor(const JobActor& a);  // a job's parameter server (type "troupe.ps")
// "worker-2 (actor 1a2b3c4d on node 5e6f7a8b)"
std::string describe_member(const JobActor& a, const ActorId& id, const NodeId& node);
// Sets actor `id`'s record's restart count: a job actor replacing one that failed is its slot's
// `restarts`-th (best effort).
void count_restarts(gcs::Store& store, const ActorId& id, int restarts);
// Records an event about `job` (logged, not returned, when the GCS refuses it).
void job_event(gcs::Store& store, const std::string& kind, const JobId& job, const std::string& message);

}  // namespace troupe::actors
