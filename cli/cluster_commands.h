// Shared pieces of the cluster subcommands (up, head, node, status): signals that stop a process's
// main loop, a GCS connection from the session file, the dashboard's address.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "actors/head_messages.h"
#include "cli/session.h"
#include "core/ids.h"
#include "gcs/redis_server.h"
#include "gcs/redis_store.h"

namespace troupe::cli {

// Set by SIGTERM and SIGINT once install_stop_signals() ran.
const std::atomic<bool>& stop_requested();
void install_stop_signals();

// Connects to the GCS the session file names.
Expected<std::unique_ptr<gcs::RedisStore>> connect_gcs(const ClusterInfo& info);

// How to start the session's embedded redis-server again (same port, password, bind and data
// directory; detached), as the head's watchdog and `up --restart-head` do.
gcs::RedisServerOptions embedded_redis_options(const Session& session, const ClusterInfo& info);

// Asks the cluster's head to stop job `job` (its actors end, the job is CANCELLED with `reason`):
// the head's reply (actors asked to stop, the job's state after), or why the head could not be
// reached or refused, within `timeout`.
Expected<actors::StopJobReply> request_job_stop(const ClusterInfo& info, const JobId& job, const std::string& reason,
                                                std::chrono::milliseconds timeout);

// Asks the head to stop `actor`, a live actor of no job (`troupe spawn`'s): where it ran, or why not.
// Asks the head to shut down every node but its own (`troupe down`): which nodes it asked, which
// did not answer (actors/head_messages.h ShutdownNodes).
Expected<actors::ShutdownNodesReply> request_nodes_shutdown(const ClusterInfo& info, const std::string& reason,
                                                           std::chrono::milliseconds timeout);
Expected<actors::StopActorReply> request_actor_stop(const ClusterInfo& info, const ActorId& actor,
                                                    const std::string& reason, std::chrono::milliseconds timeout);

// The actor whose id starts with `prefix` (at least 4 hex digits): not_found naming the prefix, or
// invalid_argument when several match.
Expected<ActorId> find_actor(gcs::Store& store, const std::string& prefix);

// The dashboard's link as the head recorded it in the GCS — with ?token=<token> when the dashboard
// needs the token and `token` is given, with a note when it is not — "off (...)" when there is
// none, or why it could not be read.
std::string dashboard_line(gcs::Store& store, const std::string& token);

}  // namespace troupe::cli
