// Creating, opening and laying out the shared-memory segment (collectives/shm_segment.h).
#include "collectives/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

namespace troupe::collectives::shm {

namespace {

constexpr uint64_t kMagic = 0x74727075'73686d32ull;  // "trpushm2": one barrier bell per group
constexpr size_t kPage = 4096;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
std::string errno_text() { return std::strerror(errno); }

int label_of(const ShmGroupOptions& o, int r) {
  return r >= 0 && r < static_cast<int>(o.rank_labels.size()) ? o.rank_labels[r] : r;
}

std::string labels_of(const ShmGroupOptions& o, const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(label_of(o, r));
  return s;
}

Status check_options(const ShmGroupOptions& o) {
  if (o.name.empty() || o.name.size() > 200) return invalid_argument("shm group name must have 1 to 200 characters");
  for (char c : o.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return invalid_argument("shm group name '" + o.name + "' may hold only letters, digits, '.', '_' and '-'");
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return invalid_argument("rank " + std::to_string(o.rank) + " is not in a group of " + std::to_string(o.size));
  if (o.staging_bytes < 2 * kPage) return invalid_argument("shm staging_bytes must be at least 8 KiB");
  if (o.mailbox_bytes < kPage) return invalid_argument("shm mailbox_bytes must be at least 4 KiB");
  return {};
}

// Unmaps on scope exit unless released: the error paths of join() leak nothing.
struct Mapping {
  char* base = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (base) ::munmap(base, bytes);
  }
  char* release() { return std::exchange(base, nullptr); }
};

}  // namespace

bool process_gone(int32_t pid) {
  if (pid <= 0) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A zombie (state Z after the command name, which may hold spaces and parentheses) has exited.
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return true;
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

Segment::Offsets Segment::offsets(int size, size_t staging_bytes, size_t mailbox_bytes, size_t arena_bytes) {
  const size_t n = static_cast<size_t>(size);
  Offsets o{};
  o.controls = round_up(sizeof(SegmentHeader), 64);
  o.heads = o.controls + n * sizeof(RankControl);
  o.rings = round_up(o.heads + n * n * sizeof(MailboxHead), kPage);
  o.staging = round_up(o.rings + n * n * mailbox_bytes, kPage);
  o.arenas = o.staging + n * staging_bytes;
  o.total = o.arenas + n * arena_bytes;
  return o;
}

Segment::Segment(char* base, int rank) : base_(base), rank_(rank), header_(reinterpret_cast<SegmentHeader*>(base)) {
  at_ = offsets(header_->size, header_->staging_bytes, header_->mailbox_bytes, header_->arena_bytes);
}

Segment::~Segment() {
  if (rank_ >= 0) {
    control(rank_).closed.store(1);
    for (int r = 0; r < size(); ++r) control(r).bell.rings.fetch_add(1);  // sleepers see it within a slice
    header_->barrier_bell.rings.fetch_add(1);
  }
  ::munmap(base_, at_.total);
}

RankControl& Segment::control(int rank) {
  return reinterpret_cast<RankControl*>(base_ + at_.controls)[rank];
}
MailboxHead& Segment::mailbox(int from, int to) {
  return reinterpret_cast<MailboxHead*>(base_ + at_.heads)[from * size() + to];
}
char* Segment::mailbox_data(int from, int to) {
  return base_ + at_.rings + static_cast<size_t>(from * size() + to) * header_->mailbox_bytes;
}
char* Segment::staging(int rank, int parity) {
  return base_ + at_.staging + static_cast<size_t>(rank) * header_->staging_bytes + parity * slot_bytes();
}
char* Segment::arena(int rank) { return base_ + at_.arenas + static_cast<size_t>(rank) * header_->arena_bytes; }

namespace {

// The layout every rank computes alike from the options: sizes rounded so every slot, ring and arena
// starts on a page; where the arenas start and the segment's size (Segment::offsets).
struct Layout {
  size_t staging = 0, mailbox = 0, arena = 0;
  size_t arenas = 0, total = 0;
};

// Rank 0: creates, sizes, maps and fills the segment into `map`.
Status create_segment(const ShmGroupOptions& o, const std::string& path, const std::string& who, const Layout& l,
                      Clock::time_point deadline, Mapping& map) {
  const size_t staging = l.staging, mailbox = l.mailbox, arena = l.arena;
  // Unlink-and-recreate: a segment left by a crashed run under this name is never reused, and
  // O_EXCL makes sure the one we fill is the one we created.
  int fd = -1;
  while (fd < 0) {
    ::shm_unlink(path.c_str());
    fd = ::shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && (errno != EEXIST || Clock::now() >= deadline))
      return io_error(who + ": shm_open(" + path + "): " + errno_text() + "; is /dev/shm mounted and writable?");
  }
  if (::ftruncate(fd, static_cast<off_t>(l.total)) != 0) {
    Status st = io_error(who + ": cannot size /dev/shm" + path + " to " + std::to_string(l.total) +
                         " bytes: " + errno_text() + "; free space in /dev/shm or lower the buffer sizes");
    ::close(fd);
    ::shm_unlink(path.c_str());
    return st;
  }
  // The arenas hold what ranks write every call (a sync job's gradients): their pages are reserved
  // now, so a /dev/shm too small for them fails here, naming it, not with a SIGBUS mid-training.
  if (arena > 0) {
    const int e = ::posix_fallocate(fd, static_cast<off_t>(l.arenas), static_cast<off_t>(l.total - l.arenas));
    if (e != 0 && e != EOPNOTSUPP && e != EINVAL) {
      Status st = io_error(who + ": cannot reserve " + std::to_string(l.total - l.arenas) + " bytes of arenas in /dev/shm" +
                           path + ": " + std::strerror(e) + "; free space in /dev/shm or lower shared_buffer_bytes");
      ::close(fd);
      ::shm_unlink(path.c_str());
      return st;
    }
  }
  void* p = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(path.c_str());
    return io_error(who + ": mmap of " + std::to_string(l.total) + " bytes: " + errno_text());
  }
  map = {static_cast<char*>(p), l.total};
  // The file is zero-filled: every atomic starts at 0. Fill the layout, then publish it.
  auto* h = reinterpret_cast<SegmentHeader*>(map.base);
  h->magic = kMagic;
  h->size = o.size;
  h->creator_pid = static_cast<int32_t>(::getpid());
  h->staging_bytes = staging;
  h->mailbox_bytes = mailbox;
  h->arena_bytes = arena;
  h->total_bytes = l.total;
  h->ready.store(1, std::memory_order_release);
  return {};
}

// The other ranks: wait for rank 0's segment of this layout and map it into `map`.
Status open_segment(const ShmGroupOptions& o, const std::string& path, const std::string& who, const Layout& l,
                    Clock::time_point deadline, Mapping& map) {
  const size_t staging = l.staging, mailbox = l.mailbox, arena = l.arena;
  while (true) {
    int fd = ::shm_open(path.c_str(), O_RDWR, 0600);
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == l.total) {
      void* p = ::mmap(nullptr, l.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) map = {static_cast<char*>(p), l.total};
    } else if (fd >= 0 && st.st_size > 0 && static_cast<size_t>(st.st_size) != l.total) {
      // Sized by rank 0 for another layout (or a stale segment of another shape).
      auto* h = static_cast<SegmentHeader*>(::mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, fd, 0));
      if (h != MAP_FAILED) {
        bool ours = h->ready.load(std::memory_order_acquire) == 1 && !process_gone(h->creator_pid);
        std::string theirs = "size " + std::to_string(h->size) + ", staging " + std::to_string(h->staging_bytes) +
                             ", mailbox " + std::to_string(h->mailbox_bytes) + ", arena " +
                             std::to_string(h->arena_bytes);
        ::munmap(h, sizeof(SegmentHeader));
        if (ours) {
          ::close(fd);
          return invalid_argument(who + ": rank 0 created it with " + theirs + " but this rank asked for size " +
                                  std::to_string(o.size) + ", staging " + std::to_string(staging) + ", mailbox " +
                                  std::to_string(mailbox) + ", arena " + std::to_string(arena) +
                                  "; pass the same ShmGroupOptions on every rank");
        }
      }
    }
    if (fd >= 0) ::close(fd);
    if (map.base) {
      auto* h = reinterpret_cast<SegmentHeader*>(map.base);
      if (h->ready.load(std::memory_order_acquire) == 1 && h->magic == kMagic && h->size == o.size &&
          !process_gone(h->creator_pid))
        break;
      map = Mapping{};  // not filled in yet, or stale (its creator died): look again
    }
    if (Clock::now() >= deadline)
      return Status(Code::timeout, who + ": rank 0 did not create /dev/shm" + path + " before the deadline (" +
                                       std::to_string(o.timeout.count()) + " ms); is rank 0 running?");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return {};
}

}  // namespace

Expected<std::unique_ptr<Segment>> Segment::join(const ShmGroupOptions& o) {
  TROUPE_RETURN_IF_ERROR(check_options(o));
  const std::string path = "/troupe." + o.name;
  const std::string who = "rank " + std::to_string(label_of(o, o.rank)) + " joining shm group '" + o.name + "'";
  const auto deadline = Clock::now() + o.timeout;
  Layout l;
  l.staging = round_up(o.staging_bytes, 2 * kPage);
  l.mailbox = round_up(o.mailbox_bytes, kPage);
  l.arena = round_up(o.shared_buffer_bytes, kPage);
  const Offsets want = offsets(o.size, l.staging, l.mailbox, l.arena);
  l.arenas = want.arenas;
  l.total = want.total;
  Mapping map;
  TROUPE_RETURN_IF_ERROR(o.rank == 0 ? create_segment(o, path, who, l, deadline, map)
                                     : open_segment(o, path, who, l, deadline, map));

  auto segment = std::unique_ptr<Segment>(new Segment(map.release(), o.rank));
  segment->labels_ = o.rank_labels;
  RankControl& me = segment->control(o.rank);
  int32_t expected = 0;
  if (!me.pid.compare_exchange_strong(expected, static_cast<int32_t>(::getpid()))) {
    segment->rank_ = -1;  // not ours: the destructor must not mark that rank closed
    return invalid_argument(who + ": rank " + std::to_string(o.rank) + " already attached (pid " +
                            std::to_string(expected) + "); every rank must be given once");
  }
  segment->header().attached.fetch_add(1);
  // Wait for the others; rank 0 then removes the name so no crash can leave it behind.
  while (segment->header().attached.load() < o.size) {
    if (o.rank != 0 && process_gone(segment->header().creator_pid))
      return unavailable(who + ": rank 0 (pid " + std::to_string(segment->header().creator_pid) +
                         ") exited while the group formed");
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < o.size; ++r)
        if (segment->control(r).pid.load() == 0) missing.push_back(r);
      if (o.rank == 0) ::shm_unlink(path.c_str());
      return Status(Code::timeout, who + ": rank(s) " + labels_of(o, missing) + " did not attach before the deadline (" +
                                       std::to_string(o.timeout.count()) + " ms); are they running with the same name?");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  if (o.rank == 0) ::shm_unlink(path.c_str());
  return segment;
}

std::string Segment::rank_list(const std::vector<int>& ranks) const {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(label(r));
  return s;
}

}  // namespace troupe::collectives::shm
