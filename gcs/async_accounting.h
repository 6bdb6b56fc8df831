// Exactly-once data accounting of an async parameter-server job, provable from the GCS alone.
//
// An async job's workers claim ledger shards as they get to them and push a gradient per batch to
// every parameter server, each push tagged with the (epoch, shard, offset, rows) of its batch. Each
// server records, per (epoch, ledger shard), the examples it applied and whether every push started
// exactly where the shard's previous one ended (trainers/ps/applied_data.h): a shard trained again
// from 0 after a failure shows as duplicates, examples skipped show as gaps. A replacement of a
// failed worker resumes its predecessor's shards where the servers' applied data ends and completes
// a push its predecessor got to some servers only (trainers/job/ps_takeover.h). Once every worker
// finished, each server writes its record (PsAppliedRecord); rank 0 waits for them before it
// records the job's success.
//
// The proof (account_async_job): every shard of every epoch is DONE in the ledger, and on every
// server every shard's examples were applied exactly once: count == the shard's size, no
// duplicates, no gaps. A server restored from a checkpoint starts from the record in that
// checkpoint (taken with its parameters) and gets the pushes it lost replayed by the workers
// (trainers/ps/ps_client.h): its record is checked like any other. One restored from a checkpoint
// without a record: the proof says exactly-once cannot be shown for it rather than claim it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"
#include "gcs/store.h"
#include "gcs/tables.h"

namespace troupe::gcs {

// One (epoch, ledger shard) as a server saw it.
struct AppliedCount {
  int epoch = 0;
  int shard = 0;
  int64_t applied = 0;
  int64_t duplicates = 0;
  int64_t gaps = 0;
};

// Table "ps_applied_data", key "<job>/<server>".
struct PsAppliedRecord {
  JobId job;
  int server = 0;
  int attempt = 0;             // the server's attempt (> 0: it replaced a failed one)
  int64_t restored_step = -1;  // >= 0: restored from the checkpoint of this version; its record starts there
  bool restored_record = false;  // the checkpoint held its record (else the updates before are unaccounted)
  int64_t replayed = 0;        // pushes the workers replayed to it after its restore
  std::vector<AppliedCount> shards;
  int64_t recorded_ms = 0;
};
std::string encode(const PsAppliedRecord& r);
Status decode(const std::string& bytes, PsAppliedRecord* out);
std::string record_key(const PsAppliedRecord& r);
template <> struct TableName<PsAppliedRecord> { static constexpr const char* value = "ps_applied_data"; };

struct AsyncAccountingReport {
  bool exactly_once = false;
  int epochs = 0;
  int shards = 0;                   // ledger shards per epoch
  int servers = 0;
  int64_t examples = 0;             // per server: the epochs' shard sizes summed
  int64_t reclaimed_shards = 0;     // claims beyond the first
  int64_t resumed_mid_shard = 0;    // shards released at an offset > 0 (a replacement went on there)
  int restored_servers = 0;         // replacements restored from a checkpoint with their record
  int resumed_servers = 0;          // started from the checkpoint of the job this one resumed
  int64_t replayed = 0;             // pushes replayed to them
  std::vector<std::string> problems;  // each missing, doubled, skipped or unprovable piece, named
  std::string summary() const;      // one line for events and logs
};

// Checks `epochs` epochs of `shards` ledger shards each against the records of `servers` servers.
// Errors only when the GCS cannot be read; a failed proof is a report with exactly_once false and
// the problems named.
Expected<AsyncAccountingReport> account_async_job(Store& store, const JobId& job, int epochs, int shards, int servers);

}  // namespace troupe::gcs
