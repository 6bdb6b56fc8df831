// The ended actors the GCS keeps: every actor that ends (FINISHED or DEAD, gcs/records.h) leaves its
// record behind for `troupe status`, the dashboard and the job supervisor (which reads an exit's
// reason there). Without a bound they pile up — a cluster that spawns and stops actors all day, or
// a search of many trials, would carry every record it ever wrote, and status, the dashboard and
// /metrics would slow down with them. The head keeps the newest `keep` ended records (setting
// ended_actors_kept, as Ray keeps a bounded number of dead actors) and removes the older ones.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "gcs/store.h"

namespace troupe::gcs {

// Removes the ended actor records beyond the newest `keep` (newest by their last change,
// updated_ms; ties by id). PENDING, ALIVE and RESTARTING records are never touched. keep 0 keeps
// them all. Returns how many were removed; a store error as is (some may have been removed).
// Costs one HKEYS when the table holds at most `keep` records, else one read of the whole table.
Expected<size_t> prune_ended_actors(Store& store, size_t keep);

}  // namespace troupe::gcs
