// The shared-memory barrier and the agreement check at the start of every native call
// (collectives/shm_collectives.h). A barrier is one counter per rank: a rank arriving at barrier b
// stores b in its own counter; it has passed once every counter reads >= b, and the rank that
// completes the barrier wakes the sleepers.
// No rank ever writes another's counter, so a rank that dies mid-barrier leaves nothing held.
#include "collectives/shm_collectives.h"

namespace troupe::collectives::shm {

PublishedCall PublishedCall::from(const CallDescriptor& d, int64_t arena_offset) {
  PublishedCall p{};
  p.sequence = d.sequence;
  p.count = d.count;
  p.arena_offset = arena_offset;
  p.root = d.root;
  p.kind = static_cast<uint8_t>(d.kind);
  p.dtype = static_cast<uint8_t>(d.dtype);
  p.reduce = d.reduce;
  p.wire = static_cast<uint8_t>(d.wire);
  return p;
}

CallDescriptor PublishedCall::descriptor() const {
  CallDescriptor d;
  d.sequence = sequence;
  d.count = count;
  d.root = root;
  d.kind = static_cast<CollectiveKind>(kind);
  d.dtype = static_cast<DType>(dtype);
  d.reduce = reduce;
  d.wire = static_cast<DType>(wire);
  return d;
}

const PublishedCall& Collectives::published(int rank) {
  // The call's parity was taken in agree(), which counted it.
  return s_.segment->control(rank).calls[(s_.native_calls - 1) & 1];
}

Status Collectives::sync(const NativeCall& call) {
  Segment& seg = *s_.segment;
  const uint64_t target = ++s_.barriers;
  auto arrived = [&] {
    for (int r = 0; r < s_.size(); ++r)
      if (seg.control(r).arrived.load(std::memory_order_acquire) < target) return false;
    return true;
  };
  auto missing = [&](std::vector<int>& out) {
    for (int r = 0; r < s_.size(); ++r)
      if (seg.control(r).arrived.load() < target) out.push_back(r);
  };
  // Arrive; whoever then sees every rank arrived wakes the sleepers, with one ring of the barrier
  // bell. The last rank to arrive always sees it (seq_cst store, then loads); others may too.
  seg.control(s_.rank()).arrived.store(target);
  if (arrived()) {
    s_.waiter.ring_barrier();
    return {};
  }
  WaitOutcome why = s_.waiter.wait(s_.waiter.barrier_bell(), arrived, missing, call.deadline);
  switch (why.kind) {
    case WaitOutcome::ready: return {};
    case WaitOutcome::aborted: return s_.fail(s_.waiter.abort_status());
    case WaitOutcome::exited:
      return s_.fail(unavailable(call.prefix + ": rank " + std::to_string(seg.label(why.rank)) + " (pid " +
                                 std::to_string(why.pid) + ") exited during the call; re-form the group without it"));
    case WaitOutcome::closed:
      return s_.fail(unavailable(call.prefix + ": rank " + std::to_string(seg.label(why.rank)) +
                                 " closed its transport (shm) before arriving"));
    case WaitOutcome::timed_out: {
      std::vector<int> late;
      missing(late);
      return s_.fail(Status(Code::timeout, call.prefix + ": rank(s) " + seg.rank_list(late) +
                                               " did not arrive before the deadline (shm)"));
    }
  }
  return internal_error(call.prefix + ": unknown wait outcome");
}

Status Collectives::agree(const NativeCall& call, int64_t arena_offset) {
  if (!s_.failed.ok())
    return Status(s_.failed.code(), call.prefix + ": this shm transport failed earlier: " + s_.failed.message());
  if (s_.waiter.aborted()) return s_.fail(s_.waiter.abort_status());
  // Parity by native call: a rank rewrites this entry two calls later, after passing the next
  // call's first barrier, which every rank reaches only once it has read this one.
  s_.segment->control(s_.rank()).calls[s_.native_calls++ & 1] = PublishedCall::from(call.descriptor, arena_offset);
  TROUPE_RETURN_IF_ERROR(sync(call));
  // Every rank compares every descriptor with rank 0's, so all return the same error.
  const CallDescriptor first = published(0).descriptor();
  for (int r = 1; r < s_.size(); ++r) {
    const CallDescriptor other = published(r).descriptor();
    if (other != first)
      return s_.fail(invalid_argument(call.prefix + ": rank " + std::to_string(s_.segment->label(r)) + " called " + other.describe() +
                                      " but rank " + std::to_string(s_.segment->label(0)) + " called " + first.describe() +
                                      "; every rank must issue the same collectives in the same order"));
  }
  return {};
}

Status Collectives::barrier(const NativeCall& call) { return agree(call); }

void* Collectives::shared_buffer(size_t bytes) {
  Segment& seg = *s_.segment;
  return seg.arena_bytes() > 0 && bytes <= seg.arena_bytes() ? seg.arena(s_.rank()) : nullptr;
}

}  // namespace troupe::collectives::shm
