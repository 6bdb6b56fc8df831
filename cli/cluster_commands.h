// Shared pieces of the cluster subcommands (up, head, node, status): signals that stop a process's
// main loop, and a GCS connection from the session file.
#pragma once

#include <atomic>
#include <memory>

#include "cli/session.h"
#include "gcs/redis_store.h"

namespace troupe::cli {

// Set by SIGTERM and SIGINT once install_stop_signals() ran.
const std::atomic<bool>& stop_requested();
void install_stop_signals();

// Connects to the GCS the session file names.
Expected<std::unique_ptr<gcs::RedisStore>> connect_gcs(const ClusterInfo& info);

}  // namespace troupe::cli
