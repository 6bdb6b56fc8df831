// A checkpoint's manifest mirrored on disk, beside its shard files, with what a restart from it
// needs of the GCS: the job's trained ranges through its step and the shard-ledger records of the
// epochs it finished. The GCS is the source of truth while it has its data; the mirror is what
// survives a GCS that lost it (its data directory deleted: gcs/gcs_stamp.h), so the job supervisor
// can write a sync, central or pipeline job's checkpoints back and restart the job from them
// (actors/job_gcs_loss.cc) instead of failing it.
//
// Written by the member that commits the checkpoint (trainers/job/job_checkpoint.h), after every
// shard file is durable and the steps are recorded as trained, and BEFORE the GCS manifest: every
// GCS manifest has its mirror. A mirror without a GCS manifest (a kill between the two) is a
// checkpoint that was complete; only a lost GCS ever reads it.
//
// The file <step dir>/MANIFEST.trpm:
//   magic "TRPMANI1" | msgpack [format version, manifest, first step, steps per epoch,
//                               [trained range...], [shard record...]] | xxh64 of all before (8 bytes LE)
// where the manifest, each range and each shard record are their GCS encodings (msgpack bin, each
// with the record schema version). Written to a temporary file, fsynced, renamed, the directory
// fsynced. A read checks magic, size, checksum, format and record versions and that the contents
// agree (one job, ranges through the step and tiling it): any defect is corrupt_data or
// version_mismatch naming the file, and the checkpoint is not trusted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/data_accounting.h"
#include "gcs/records.h"
#include "gcs/store.h"

namespace troupe::gcs {

constexpr uint32_t kMirrorFormatVersion = 1;
constexpr const char* kMirrorFileName = "MANIFEST.trpm";

struct CheckpointMirror {
  CheckpointRecord manifest;
  // 0 when the job has no trained ranges to keep (an async job: its accounting is its servers'
  // applied-data records); else its steps per epoch and the global step its ranges start from (0,
  // or the step of the checkpoint a `--resume`d job started from). The ranges then tile
  // (first_step, manifest.step] exactly.
  int64_t steps_per_epoch = 0;
  int64_t first_step = 0;
  std::vector<TrainedRange> trained;  // the job's ranges ending at or before manifest.step
  std::vector<ShardRecord> ledger;    // its ledger records of the epochs done by manifest.step
};

// <step dir>/MANIFEST.trpm
std::string mirror_path(const std::string& step_dir);

// The file's bytes, and back. decode_mirror names `path` in every error.
std::string encode_mirror(const CheckpointMirror& m);
Status decode_mirror(const std::string& bytes, const std::string& path, CheckpointMirror* out);

// What `store` holds for `manifest` of `job`: with steps_per_epoch > 0, the job's ranges ending at
// or before the manifest's step and the ledger records of every epoch those steps finish (a
// shard of such an epoch not yet DONE — its worker completes it after the epoch's last step, maybe
// after this commit — is mirrored DONE: the checkpoint holds every step of that epoch). Errors
// only when the GCS cannot be read.
Expected<CheckpointMirror> gather_mirror(Store& store, const CheckpointRecord& manifest, int64_t steps_per_epoch,
                                         int64_t first_step);

// Writes `m` durably to mirror_path(m.manifest.dir). io_error naming the file.
Status write_checkpoint_mirror(const CheckpointMirror& m);

// Reads and checks a mirror: not_found when the file does not exist; corrupt_data /
// version_mismatch / io_error naming the file otherwise.
Expected<CheckpointMirror> read_checkpoint_mirror(const std::string& path);

// Whether `ranges` (one job's) tile the global steps (first_step, last_step] exactly in epochs of
// `steps_per_epoch`: corrupt_data naming the first gap or overlap.
Status check_ranges_tile(const std::vector<TrainedRange>& ranges, int64_t steps_per_epoch, int64_t first_step,
                         int64_t last_step);

}  // namespace troupe::gcs
