// What the head was asked to run, kept in the GCS (table "job_submissions", key: the job id) so a
// restarted head can supervise a running job again: its actors, placement policy and restart
// policy exactly as `troupe submit` sent them (SubmitJob), as JSON. Written when the job supervisor
// accepts a submission, before any actor is placed.
#pragma once

#include "actors/head_messages.h"
#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"

namespace troupe::actors {

// A submission as JSON text and back (invalid_argument naming what does not decode). `troupe tune`
// stores its trials' submissions in the search record this way (gcs/search_record.h).
std::string submission_json(const SubmitJob& job);
Expected<SubmitJob> submission_from_json(const std::string& text);

Status save_submission(gcs::Store& store, const SubmitJob& job);
// not_found when the job was never submitted to a head (or by a head older than this record);
// corrupt_data naming the job when the record does not decode.
Expected<SubmitJob> load_submission(gcs::Store& store, const JobId& job);

}  // namespace troupe::actors
