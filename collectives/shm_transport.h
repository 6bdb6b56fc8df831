// Shared-memory transport: the ranks of a group on one host (threads of one process or separate
// processes) share one segment of /dev/shm. It carries point-to-point bytes (one bounded ring per
// ordered pair of ranks, so the generic algorithms run over it when asked for by name) and runs the
// collectives itself (native(), name "shm", the one "auto" picks): ranks reduce straight out of
// each other's staging slots or zero-copy arenas, with no sockets and no extra process.
//
//   ShmGroupOptions options;
//   options.name = "dp.3";                  // unique per group and generation
//   options.rank = rank;
//   options.size = 4;
//   options.shared_buffer_bytes = 64 << 20;  // optional zero-copy arena per rank
//   auto transport = connect_shm_group(options);
//   Communicator comm(std::move(*transport));
//   float* grads = static_cast<float*>(comm.shared_buffer(n * 4));  // peers read it in place
//
// Forming: rank 0 unlinks any segment left under the name by a crashed earlier run and creates a
// fresh one (O_EXCL); the others open it, retrying until the deadline, and skip a segment whose
// creator has died (a stale one they may have opened first). Every rank writes its pid; once all
// attached, rank 0 unlinks the name, so nothing is left in /dev/shm whichever process dies later.
//
// Waiting spins briefly (when ranks outnumber cores, with sched_yield so the peers queued on the
// core run; see shm_wait.h), then sleeps on a futex in short slices, checking between slices the
// deadline, the group's abort word and whether the ranks it waits for are alive (their pid) or
// closed their transport. Errors name the rank at fault:
//   "allreduce #17 (shm): rank 3 (pid 1234) exited during the call"
//   "rank 1 aborted allreduce #17 (shm): ..."        (Transport::abort: first writer wins)
//   "allreduce #17 (shm): rank(s) 2, 3 did not arrive before the deadline"
// Every native call starts with a barrier at which each rank compares all ranks' CallDescriptors:
// a rank that called something else (count, dtype, op, root, sequence) makes the call fail with
// invalid_argument on every rank, naming it and both descriptors. (Point-to-point algorithms chosen
// by name are not checked, as over TCP.) A failed transport stays failed, a disagreement included.
// CollectiveOptions::wire is ignored by the native path: nothing travels over a wire, so results
// are exact f32 accumulations whatever it says.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/transport.h"

namespace troupe::collectives {

struct ShmGroupOptions {
  std::string name;  // segment name, unique per group and generation ("dp.3"); [A-Za-z0-9._-]
  int rank = 0;
  int size = 0;
  std::chrono::milliseconds timeout{30000};  // for every rank to attach
  // Per-rank zero-copy arena (Communicator::shared_buffer); 0 for none. Same on every rank.
  size_t shared_buffer_bytes = 0;
  // Per-rank staging for the native collectives (two slots of half this, f32); bounds memory for
  // any count. Same on every rank.
  size_t staging_bytes = size_t{8} << 20;
  // Ring buffer per ordered pair of ranks for send/recv. Same on every rank.
  size_t mailbox_bytes = size_t{256} << 10;
  // The rank numbers errors use for ranks 0..size-1: the group's global ranks when this is one
  // host's part of a hierarchical group. Empty: the ranks themselves.
  std::vector<int> rank_labels;
};

// Forms the group for options.rank. Fails with `timeout` naming the ranks that did not attach by
// the deadline, invalid_argument for a bad name/rank/size or options that differ from rank 0's,
// io_error when /dev/shm refuses (the message says which call failed).
Expected<std::unique_ptr<Transport>> connect_shm_group(const ShmGroupOptions& options);

}  // namespace troupe::collectives
