// Internal to the shared-memory transport: the layout of the /dev/shm segment and how a rank joins
// it (see shm_transport.h for the protocol). Every field below is written by one rank only, except
// the bells and the abort record, so ranks never contend on a lock; a rank killed at any point
// leaves nothing held (at worst a bell's sleeper count stays high, which costs a spare wake call).
//
//   [SegmentHeader][RankControl x size][MailboxHead x size*size]
//   [mailbox rings x size*size][staging: 2 slots x size][arenas x size]
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/shm_transport.h"

namespace troupe::collectives::shm {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm needs address-free 64-bit atomics");

// What a rank announces at the start of a native call; compared by all at its first barrier.
struct PublishedCall {
  uint64_t sequence;
  uint64_t count;
  int64_t arena_offset;  // in-place buffer at this offset of the rank's arena, or -1 (staged)
  int32_t root;
  uint8_t kind, dtype, reduce, wire;

  static PublishedCall from(const CallDescriptor& d, int64_t arena_offset);
  CallDescriptor descriptor() const;
};

// A futex word and how many ranks sleep on it. Whoever changes what the sleepers wait for bumps
// `rings`, then calls FUTEX_WAKE only when `sleepers` is nonzero (shm_wait.h). On its own cache
// line: every rank writes it.
struct alignas(64) Bell {
  std::atomic<uint32_t> rings;
  std::atomic<uint32_t> sleepers;
};

// One rank's control block.
struct alignas(64) RankControl {
  std::atomic<uint64_t> arrived;   // barriers this rank has reached
  std::atomic<uint32_t> closed;    // 1 once its transport is destroyed
  std::atomic<int32_t> pid;        // 0 until attached
  PublishedCall calls[2];          // by native call parity
  Bell bell;                       // this rank sleeps on it waiting for its mailboxes
};

// Byte counts through one ordered pair's ring: head written by the sender, tail by the receiver.
struct MailboxHead {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
};

struct SegmentHeader {
  uint64_t magic;
  int32_t size;
  int32_t creator_pid;
  uint64_t staging_bytes, mailbox_bytes, arena_bytes, total_bytes;
  std::atomic<uint32_t> ready;     // set by rank 0 last, once the layout above is written
  std::atomic<int32_t> attached;   // ranks that wrote their pid
  // Ranks waiting in a barrier sleep on this one word; the rank that completes the barrier (sees
  // every `arrived` reach it) rings it once for all. Abort and close ring it too.
  Bell barrier_bell;
  alignas(64) std::atomic<uint32_t> abort_state;  // 0 none, 1 being written, 2 set
  int32_t abort_rank;
  int32_t abort_code;
  char abort_message[1024];
};

// One rank's mapping of the segment. Destroying it marks the rank closed and unmaps.
class Segment {
 public:
  // Creates (rank 0) or opens the segment, writes this rank's pid and waits until all attached.
  static Expected<std::unique_ptr<Segment>> join(const ShmGroupOptions& options);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int rank() const { return rank_; }
  // How errors name rank r (ShmGroupOptions::rank_labels).
  int label(int r) const { return r >= 0 && r < static_cast<int>(labels_.size()) ? labels_[r] : r; }
  std::string rank_list(const std::vector<int>& ranks) const;
  int size() const { return header_->size; }
  SegmentHeader& header() { return *header_; }
  RankControl& control(int rank);
  MailboxHead& mailbox(int from, int to);
  char* mailbox_data(int from, int to);
  size_t mailbox_bytes() const { return header_->mailbox_bytes; }
  // Staging slot `parity` (0 or 1) of `rank`: slot_bytes() bytes.
  char* staging(int rank, int parity);
  size_t slot_bytes() const { return header_->staging_bytes / 2; }
  char* arena(int rank);
  size_t arena_bytes() const { return header_->arena_bytes; }

 private:
  struct Offsets {
    size_t controls, heads, rings, staging, arenas, total;
  };
  static Offsets offsets(int size, size_t staging_bytes, size_t mailbox_bytes, size_t arena_bytes);

  Segment(char* base, int rank);
  char* base_;
  int rank_;
  std::vector<int> labels_;
  SegmentHeader* header_;
  Offsets at_;
};

// True when `pid` has exited (no such process, or a zombie waiting to be reaped). Never reaps it:
// the process that forked the ranks keeps their exit status.
bool process_gone(int32_t pid);

}  // namespace troupe::collectives::shm
