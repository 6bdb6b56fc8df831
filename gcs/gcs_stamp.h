// The head's stamp in the GCS (table "cluster", key "stamp"): a random value the head writes when
// it starts, and again after a loss. Only a GCS that kept its data still holds it: one that answers
// without it came back empty — an external redis-server restarted without persistence, or the
// embedded one's data directory deleted — and every record of the cluster is gone with it. The head
// checks it every tick (actors/head_process.cc) and rebuilds what the live processes know
// (nodes, actors, jobs; event gcs_data_lost).
#pragma once

#include <string>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

// A new random stamp (32 hex characters).
std::string new_gcs_stamp();
Status write_gcs_stamp(Store& store, const std::string& stamp);
// true: the GCS holds `stamp`; false: it answers, but holds another or none (it lost its data, or
// another head wrote its own); an error when it does not answer.
Expected<bool> gcs_stamp_present(Store& store, const std::string& stamp);

}  // namespace troupe::gcs
