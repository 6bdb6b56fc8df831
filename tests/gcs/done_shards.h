// Ledger records for the accounting tests: every shard of epochs 1..epochs DONE.
#pragma once

#include <catch2/catch.hpp>

#include "gcs/records.h"
#include "gcs/tables.h"

namespace troupe::gcs::testing {

// Every shard of epochs 1..epochs DONE with 100 examples, claimed `claims` times each.
inline void shards_done(Store& store, const JobId& job, int epochs, int shards, int claims = 1) {
  for (int e = 1; e <= epochs; ++e) {
    for (int s = 0; s < shards; ++s) {
      ShardRecord r;
      r.job = job;
      r.epoch = e;
      r.shard = s;
      r.state = ShardState::done;
      r.examples = 100;
      r.progress = 100;
      r.claims = claims;
      REQUIRE(Table<ShardRecord>(store).put(r).ok());
    }
  }
}

}  // namespace troupe::gcs::testing
