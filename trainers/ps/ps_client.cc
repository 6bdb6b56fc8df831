// The TCP PsClient: one connection per shard. After an I/O failure a connection may be out of step
// in the middle of a frame: it is closed and, with options.resolve, dialled again (the request then
// sent again to that shard only); without, the client refuses every later call, quoting the failure.
#include "trainers/ps/ps_client.h"
#include "tls/tls_relay.h"

#include <algorithm>
#include <deque>
#include <thread>

#include <cstring>
#include <functional>

#include <spdlog/spdlog.h>

#include "trainers/ps/ps_wire.h"

namespace troupe::ps {
namespace {

using wire::Clock;
using wire::Header;
using wire::Op;

constexpr int64_t kReconnectTry = 2000;  // ms: one dial and hello while reconnecting
constexpr int64_t kResolvedDialMs = 250;  // ms: refusals retried at a published address

struct Connection {
  std::string address;
  wire::Socket socket;
  ShardRange range;
  int64_t version = 0;  // the shard's newest version it told (a push's pulled version is kept below)
  int64_t acked = -1;    // the clock of this worker's last push the shard acknowledged (-1: none)
  int64_t last_push = -1;  // its welcome: the clock of this rank's last push it applied
};

// A push kept for replays (see ps_client.h).
struct Sent {
  int64_t clock = 0;
  DataTag tag;
  int64_t top_version = 0;  // the highest version a shard answered it with
};

// What a welcome said besides the ShardInfo.
struct Welcome {
  int64_t clock = 0;
  int64_t version = 0;
  DataTag last;  // this rank's last applied push
  int64_t last_push = -1;  // and its clock
};

Expected<wire::ShardInfo> join(Connection* c, const PsClientOptions& o, int64_t my_clock, Welcome* welcome,
                               std::chrono::milliseconds dial_window = std::chrono::milliseconds::max());
Expected<wire::ShardInfo> dial_resolved(size_t i, Connection* c, const PsClientOptions& o, int64_t my_clock,
                                        Clock::time_point deadline, Welcome* welcome, bool* dialled);

class TcpPsClient final : public PsClient {
 public:
  TcpPsClient(std::vector<Connection> shards, size_t total, PsMode mode, const PsClientOptions& o,
              std::vector<WorkerPosition> positions)
      : shards_(std::move(shards)), total_(total), mode_(mode), options_(o), positions_(std::move(positions)) {
    for (const WorkerPosition& p : positions_) start_clock_ = std::max(start_clock_, p.clock);
    clock_ = start_clock_;
  }

  std::vector<WorkerPosition> positions() const override { return positions_; }

  int64_t start_clock() const override { return start_clock_; }
  size_t parameters() const override { return total_; }
  int shards() const override { return static_cast<int>(shards_.size()); }
  PsMode mode() const override { return mode_; }

  Expected<Versions> pull(int64_t clock, float* params) override {
    clock_ = clock;
    return fetch(Op::pull, clock, params);
  }
  Expected<Versions> pull_final(float* params) override { return fetch(Op::pull_final, 0, params); }

  Status push(int64_t clock, const float* grads, const Versions& pulled, const DataTag& tag) override {
    std::vector<int> every(shards_.size());
    for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int>(i);
    return push_to(every, clock, grads, pulled, tag);
  }

  void set_replay(ReplayFn replay) override { replay_ = std::move(replay); }
  int64_t replayed() const override { return replayed_; }

  Status push_to(const std::vector<int>& which, int64_t clock, const float* grads, const Versions& pulled,
                 const DataTag& tag) override {
    if (pulled.size() != shards_.size())
      return invalid_argument("push of clock " + std::to_string(clock) + ": " + std::to_string(pulled.size()) +
                              " versions for " + std::to_string(shards_.size()) + " shards");
    if (tag.size() > static_cast<size_t>(wire::kMaxSpans))
      return invalid_argument("push of clock " + std::to_string(clock) + ": a batch from " +
                              std::to_string(tag.size()) + " shards; the protocol carries " +
                              std::to_string(wire::kMaxSpans) + " at most (use fewer, larger ledger shards)");
    std::vector<size_t> todo;
    for (int i : which) {
      if (i < 0 || i >= shards())
        return invalid_argument("push to shard " + std::to_string(i) + " of " + std::to_string(shards()));
      todo.push_back(static_cast<size_t>(i));
    }
    clock_ = clock;
    const std::string what = "push of clock " + std::to_string(clock);
    Status st = exchange(what, todo, [&](size_t i, Header* h) {
      // A restored shard may be older than the one this gradient's parameters came from.
      return push_frame(i, Op::push, clock, std::min(pulled[i], shards_[i].version), grads, tag, h);
    }, Op::pushed, nullptr, nullptr, [&](size_t i) {
      // The connection broke, not the server, after it applied this push: not again.
      return shards_[i].last_push >= clock;
    });
    if (!st.ok()) return st;
    clock_ = clock + 1;
    keep(clock, tag);  // (a push to some shards completes one the others have: a replacement's catch-up)
    return st;
  }

  Expected<PushesAfter> pushes_after(int shard, int64_t clock) override {
    if (shard < 0 || shard >= shards()) return invalid_argument("history of shard " + std::to_string(shard));
    PushesAfter out;
    Status st = exchange("asking for this rank's pushes after clock " + std::to_string(clock),
                         {static_cast<size_t>(shard)}, [&](size_t, Header* h) {
      h->op = Op::history;
      h->clock = clock;
      return wire::Frame{};
    }, Op::history_reply, [&](size_t i, const Header& h) -> Status {
      out.complete = h.version == 1;
      return wire::read_history(shards_[i].socket.fd(), h, &out.pushes, deadline_);
    }, nullptr);
    if (!st.ok()) return st;
    return out;
  }

  Status replay_on(int shard, int64_t clock, const float* grads, const DataTag& tag) override {
    if (shard < 0 || shard >= shards()) return invalid_argument("replay to shard " + std::to_string(shard));
    if (tag.size() > static_cast<size_t>(wire::kMaxSpans))
      return invalid_argument("replay of clock " + std::to_string(clock) + ": a batch from too many shards");
    Status st = exchange("replay of clock " + std::to_string(clock), {static_cast<size_t>(shard)}, [&](size_t i, Header* h) {
      return push_frame(i, Op::replay, clock, shards_[i].version, grads, tag, h);
    }, Op::pushed, nullptr, nullptr, [&](size_t i) { return shards_[i].last_push >= clock; });
    if (st.ok()) {
      shards_[static_cast<size_t>(shard)].last_push = std::max(shards_[static_cast<size_t>(shard)].last_push, clock);
      ++replayed_;
    }
    return st;
  }

  Status finish() override {
    Status st = exchange("finish", all(), [](size_t, Header* h) {
      h->op = Op::finish;
      return wire::Frame{};
    }, Op::finished, nullptr, nullptr);
    finished_ = finished_ || st.ok();
    return st;
  }

  Expected<StalenessHistogram> staleness() override {
    StalenessHistogram merged;
    Status st = exchange("reading staleness statistics", all(), [](size_t, Header* h) {
      h->op = Op::stats;
      return wire::Frame{};
    }, Op::stats_reply, nullptr, &merged);
    if (!st.ok()) return st;
    return merged;
  }

 private:
  using Fill = std::function<wire::Frame(size_t shard, Header* h)>;

  // The header and payload of a push or replay (`op`) of `clock` to shard i: its slice of `grads`
  // and the batch's tag, computed from parameters of `version`.
  wire::Frame push_frame(size_t i, Op op, int64_t clock, int64_t version, const float* grads, const DataTag& tag,
                         Header* h) const {
    const uint64_t tag_bytes = tag.size() * sizeof(DataSpan);
    h->op = op;
    h->clock = clock;
    h->version = version;
    h->spans = static_cast<int32_t>(tag.size());
    h->payload = shards_[i].range.size() * sizeof(float) + tag_bytes;
    return wire::Frame{grads + shards_[i].range.begin, tag.data(), tag_bytes};
  }

  std::vector<size_t> all() const {
    std::vector<size_t> todo(shards_.size());
    for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
    return todo;
  }
  using Body = std::function<Status(size_t, const Header&)>;
  using Done = std::function<bool(size_t)>;  // after a reconnection: the shard has it already

  // Keeps the push of `clock` for replays, and forgets those every shard has in a checkpoint
  // before the newest complete one.
  void keep(int64_t clock, const DataTag& tag) {
    const int64_t every = options_.checkpoint_versions;
    if (every <= 0 || mode_ != PsMode::async) return;
    int64_t low = INT64_MAX, top = 0;
    for (const Connection& c : shards_) {
      low = std::min(low, c.version);
      top = std::max(top, c.version);
    }
    if (!history_.empty() && history_.back().clock >= clock) return;  // kept already
    history_.push_back(Sent{clock, tag, top});
    const int64_t older = (low / every) * every - every;
    while (!history_.empty() && history_.front().top_version <= older) history_.pop_front();
  }

  Expected<Versions> fetch(Op op, int64_t clock, float* params) {
    Versions versions(shards_.size());
    const std::string what = op == Op::pull ? "pull for clock " + std::to_string(clock) : "final pull";
    Status st = exchange(what, all(), [&](size_t, Header* h) {
      h->op = op;
      h->clock = clock;
      return wire::Frame{};
    }, Op::params, [&](size_t i, const Header& h) -> Status {
      versions[i] = h.version;
      return wire::read_exact(shards_[i].socket.fd(), params + shards_[i].range.begin,
                              shards_[i].range.size() * sizeof(float), deadline_);
    }, nullptr);
    if (!st.ok()) return st;
    return versions;
  }

  std::string where(size_t i) const {
    return "shard " + std::to_string(i) + " at " + shards_[i].address;
  }

  // Sends one request to every shard in `todo` (fill writes its header and returns its payload),
  // then reads every reply of op `expect`; `body` reads a reply's payload, stats replies go into
  // *stats. A shard whose connection failed is reconnected and asked again (or, without
  // reconnection, the client is broken). Returns the first error reply, after every shard answered.
  Status exchange(const std::string& what, std::vector<size_t> todo, const Fill& fill, Op expect, const Body& body,
                  StalenessHistogram* stats, const Done& done = nullptr) {
    if (!broken_.ok()) return broken_;
    Status first;
    while (!todo.empty()) {
      deadline_ = Clock::now() + options_.timeout;
      std::vector<std::pair<size_t, Status>> lost;  // shards whose connection failed, and how
      std::vector<size_t> sent;
      for (size_t i : todo) {
        Header h;
        h.worker = options_.rank;
        const wire::Frame payload = fill(i, &h);
        Status st = wire::write_frame(shards_[i].socket.fd(), h, payload.data, deadline_, payload.tail, payload.tail_bytes);
        if (st.ok()) sent.push_back(i);
        else lost.emplace_back(i, st.with_context(what + ": sending to " + where(i)));
      }
      for (size_t i : sent) {
        Status st = read_reply(i, what, expect, body, stats, &first);
        if (!st.ok()) lost.emplace_back(i, st.with_context(what + ": " + where(i)));
      }
      todo.clear();
      for (auto& [i, cause] : lost) {
        shards_[i].socket.reset();  // out of step: never read from it again
        if (!options_.resolve) return broken(cause);
        Status again = reconnect(i, cause);
        if (!again.ok()) return broken(again);
        if (done && done(i)) {
          spdlog::info("worker {}: parameter server {} had applied the {} before the connection broke; not sent again",
                       options_.rank, i, what);
          continue;
        }
        todo.push_back(i);
      }
    }
    return first;
  }

  // Reads shard i's reply. An error reply goes into *first (the first one kept) and returns ok;
  // a failure to read returns the error (the connection is then out of step).
  Status read_reply(size_t i, const std::string& what, Op expect, const Body& body, StalenessHistogram* stats,
                    Status* first) {
    const int fd = shards_[i].socket.fd();
    Header h;
    TROUPE_RETURN_IF_ERROR(wire::read_header(fd, &h, deadline_));
    if (h.op == Op::error) {
      std::string text(std::min<uint64_t>(h.payload, wire::kMaxErrorText), '\0');
      TROUPE_RETURN_IF_ERROR(wire::read_exact(fd, text.data(), text.size(), deadline_).with_context("reading an error"));
      if (first->ok()) *first = wire::error_status(h, text).with_context(what + ": " + where(i));
      return {};
    }
    if (h.op != expect)
      return corrupt_data(std::string("answered with ") + wire::op_name(h.op) + " instead of " + wire::op_name(expect));
    if (h.op == Op::params || h.op == Op::pushed) shards_[i].version = h.version;
    if (h.op == Op::pushed) shards_[i].acked = std::max(shards_[i].acked, h.clock);
    if (body) TROUPE_RETURN_IF_ERROR(body(i, h));
    if (stats) TROUPE_RETURN_IF_ERROR(read_stats(i, h, stats));
    return {};
  }

  // Dials shard i again where options_.resolve says it is now (its server restarted), with backoff,
  // until options_.reconnect_timeout; says this worker's clock, and finish again if it finished.
  Status reconnect(size_t i, const Status& cause) {
    const auto deadline = Clock::now() + options_.reconnect_timeout;
    const std::string old = shards_[i].address;
    const int64_t acked = shards_[i].acked;  // what a restored shard lost is replayed up to here
    spdlog::warn("worker {}: {}; dialling parameter server {} again (up to {:g} s)", options_.rank, cause.message(), i,
                 options_.reconnect_timeout.count() / 1000.0);
    auto backoff = std::chrono::milliseconds(50);
    Status last = cause;
    while (Clock::now() < deadline) {
      if (options_.cancel && options_.cancel->load())
        return unavailable("stopped while waiting for parameter server " + std::to_string(i) + " to come back after: " +
                           cause.message());
      Connection c;
      Welcome welcome;
      auto info = dial_resolved(i, &c, options_, clock_, deadline, &welcome, nullptr);
      if (info.ok() && (info->index != static_cast<int32_t>(i) || info->begin != shards_[i].range.begin ||
                        info->end != shards_[i].range.end || info->total != total_)) {
        return invalid_argument("parameter server " + std::to_string(i) + " came back at " + c.address +
                                " holding floats [" + std::to_string(info->begin) + ", " + std::to_string(info->end) +
                                ") as shard " + std::to_string(info->index) + "; it held [" +
                                std::to_string(shards_[i].range.begin) + ", " + std::to_string(shards_[i].range.end) +
                                "): not the same job's shard");
      }
      if (info.ok()) {
        c.range = shards_[i].range;
        c.version = welcome.version;
        c.last_push = welcome.last_push;
        c.acked = welcome.last_push;
        shards_[i] = std::move(c);
        spdlog::info("worker {}: parameter server {} is back at {} (was {}), at version {}; this worker's clock {}, "
                     "its last push applied there {}", options_.rank, i, shards_[i].address, old, welcome.version,
                     welcome.clock, welcome.last_push);
        Status st;
        if (mode_ == PsMode::async && welcome.last_push < acked) st = replay_to(i, welcome.last_push, acked);
        if (st.ok() && finished_) st = finish_on(i);
        if (st.ok()) return {};
        last = st;
        shards_[i].socket.reset();
      } else {
        last = info.status();
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    return unavailable("parameter server " + std::to_string(i) + " (last at " + old + ") did not come back within " +
                       fmt::format("{:g}", options_.reconnect_timeout.count() / 1000.0) + " s after: " + cause.message() +
                       "; last try: " + last.message() + ". Is the job's supervisor restarting it? See `troupe "
                       "status` and the server node's log");
  }

  // Shard i came back restored: its record of this rank ends at clock `after`, this worker's pushes
  // up to `until` were acknowledged before. Replays the kept pushes in between, in order (see
  // ps_client.h). Returns an error only when the connection fails (the caller dials again); a push
  // that cannot be replayed is logged, and the shard's data accounting shows it missing.
  Status replay_to(size_t i, int64_t after, int64_t until) {
    const std::string lost = "parameter server " + std::to_string(i) + " came back restored without this worker's " +
                             "pushes of clocks " + std::to_string(after + 1) + ".." + std::to_string(until);
    if (!replay_) {
      spdlog::error("worker {}: {}; no replay function is set, so they stay lost to it", options_.rank, lost);
      return {};
    }
    auto it = std::find_if(history_.begin(), history_.end(), [&](const Sent& e) { return e.clock > after; });
    if (it == history_.end() || it->clock > until) {
      spdlog::error("worker {}: {}; they are no longer kept (kept: clocks {}), so they stay lost to it", options_.rank,
                    lost, history_.empty() ? std::string("none")
                                           : std::to_string(history_.front().clock) + ".." +
                                                 std::to_string(history_.back().clock));
      return {};
    }
    if (it->clock != after + 1)  // the rest is still worth replaying: the accounting names the gap
      spdlog::error("worker {}: {}; those before clock {} are no longer kept, so they stay lost to it", options_.rank,
                    lost, it->clock);
    std::vector<float> grads(total_), fresh(shards_[i].range.size());
    int64_t count = 0, first = it->clock, done = first - 1;
    for (; it != history_.end() && it->clock <= until; ++it) {
      Status read = read_back(i, fresh.data());
      if (!read.ok() && read.code() == Code::internal) {  // the shard refused the pull (not the connection)
        spdlog::error("worker {}: {}; reading its parameters back before the replay of clock {} failed, so it and "
                      "those after it stay lost to it: {}", options_.rank, lost, it->clock, read.to_string());
        break;
      }
      TROUPE_RETURN_IF_ERROR(read.with_context("reading parameter server " + std::to_string(i) +
                                               "'s parameters before replaying clock " + std::to_string(it->clock)));
      std::fill(grads.begin(), grads.end(), 0.0f);
      Status computed = replay_(it->tag, Fresh{shards_[i].range, fresh.data()}, grads.data());
      if (!computed.ok()) {
        spdlog::error("worker {}: {}; recomputing the push of clock {} ({}) failed, so it and those after it stay "
                      "lost to it: {}", options_.rank, lost, it->clock, describe(it->tag), computed.to_string());
        break;
      }
      deadline_ = Clock::now() + options_.timeout;
      Header h;
      h.worker = options_.rank;
      const wire::Frame f = push_frame(i, Op::replay, it->clock, shards_[i].version, grads.data(), it->tag, &h);
      TROUPE_RETURN_IF_ERROR(wire::write_frame(shards_[i].socket.fd(), h, f.data, deadline_, f.tail, f.tail_bytes)
                                 .with_context("replaying the push of clock " + std::to_string(it->clock)));
      Status refused;
      TROUPE_RETURN_IF_ERROR(read_reply(i, "replay", Op::pushed, nullptr, nullptr, &refused));
      if (!refused.ok()) {
        spdlog::error("worker {}: {}; the server refused the replay of clock {}: {}", options_.rank, lost, it->clock,
                      refused.to_string());
        break;
      }
      shards_[i].last_push = done = it->clock;
      ++count;
    }
    replayed_ += count;
    if (count > 0)
      spdlog::warn("worker {}: replayed {} push(es) (clocks {}..{}) to parameter server {}, restored from a checkpoint "
                   "without them{}", options_.rank, count, first, done, i,
                   first == after + 1 && done == until ? ": every batch applied there once" : "");
    return {};
  }

  // Shard i's parameters as they stand (a pull of clock 0, which never waits for other workers
  // nor moves this one's clock), into out[0, range size). A refusal is internal_error; a failed
  // connection is returned as it is (the caller dials again).
  Status read_back(size_t i, float* out) {
    deadline_ = Clock::now() + options_.timeout;
    Header h;
    h.op = Op::pull;
    h.worker = options_.rank;
    h.clock = 0;
    TROUPE_RETURN_IF_ERROR(wire::write_frame(shards_[i].socket.fd(), h, nullptr, deadline_));
    Status refused;
    TROUPE_RETURN_IF_ERROR(read_reply(i, "reading parameters back", Op::params, [&](size_t k, const Header&) -> Status {
      return wire::read_exact(shards_[k].socket.fd(), out, shards_[k].range.size() * sizeof(float), deadline_);
    }, nullptr, &refused));
    if (!refused.ok()) return internal_error(refused.message());
    return {};
  }

  // Tells shard i alone that this worker finished (after a reconnection).
  Status finish_on(size_t i) {
    deadline_ = Clock::now() + options_.timeout;
    Header h;
    h.op = Op::finish;
    h.worker = options_.rank;
    TROUPE_RETURN_IF_ERROR(wire::write_frame(shards_[i].socket.fd(), h, nullptr, deadline_));
    Status first;
    TROUPE_RETURN_IF_ERROR(read_reply(i, "finish", Op::finished, nullptr, nullptr, &first));
    return first;
  }

  Status read_stats(size_t i, const Header& h, StalenessHistogram* merged) {
    wire::StatsPayload sp;
    if (h.payload < sizeof sp) return corrupt_data("a stats reply of " + std::to_string(h.payload) + " bytes");
    TROUPE_RETURN_IF_ERROR(wire::read_exact(shards_[i].socket.fd(), &sp, sizeof sp, deadline_));
    if (h.payload != sizeof sp + sp.buckets * sizeof(int64_t) || sp.buckets > (1u << 20))
      return corrupt_data("a stats reply of " + std::to_string(h.payload) + " bytes for " +
                          std::to_string(sp.buckets) + " buckets");
    std::vector<int64_t> buckets(sp.buckets);
    TROUPE_RETURN_IF_ERROR(wire::read_exact(shards_[i].socket.fd(), buckets.data(), buckets.size() * sizeof(int64_t),
                                            deadline_));
    merged->merge(StalenessHistogram::from_buckets(buckets, sp.max, sp.sum));
    return {};
  }

  Status broken(Status st) {
    broken_ = st.with_context("the parameter-server connections failed earlier");
    return st;
  }

  std::vector<Connection> shards_;
  size_t total_;
  PsMode mode_;
  PsClientOptions options_;
  std::vector<WorkerPosition> positions_;  // per shard, when connected
  int64_t start_clock_ = 0;  // the highest of their clocks
  int64_t clock_ = 0;        // this worker's clock, said again when reconnecting
  std::deque<Sent> history_; // pushes kept for replays, in clock order
  ReplayFn replay_;
  int64_t replayed_ = 0;
  bool finished_ = false;
  Clock::time_point deadline_;
  Status broken_;
};

// Dials c->address, says hello (with this worker's clock) and reads its ShardInfo. The dial
// (refusals retried) gets `dial_window` of o.connect_timeout when given, the hello all of it.
Expected<wire::ShardInfo> join(Connection* c, const PsClientOptions& o, int64_t my_clock, Welcome* welcome,
                               std::chrono::milliseconds dial_window) {
  const auto deadline = Clock::now() + o.connect_timeout;
  auto socket = wire::dial(c->address, std::min(deadline, Clock::now() + std::min(dial_window, o.connect_timeout)));
  if (!socket.ok()) return socket.status();
  if (o.tls) {
    auto plain = tls::wrap(socket->release(), *o.tls, tls::Role::client, o.connect_timeout,
                           "the parameter server at " + c->address);
    if (!plain.ok()) return plain.status();
    *socket = wire::Socket(*plain);
  }
  c->socket = std::move(*socket);
  const int fd = c->socket.fd();
  Header hello;
  hello.op = Op::hello;
  hello.worker = o.rank;
  hello.clock = my_clock;
  hello.version = o.attempt;
  hello.payload = o.job.size();
  TROUPE_RETURN_IF_ERROR(wire::write_frame(fd, hello, o.job.data(), deadline).with_context("sending hello"));
  Header h;
  TROUPE_RETURN_IF_ERROR(wire::read_header(fd, &h, deadline).with_context("reading the answer to hello"));
  if (h.op == Op::error) {
    std::string text(std::min<uint64_t>(h.payload, wire::kMaxErrorText), '\0');
    TROUPE_RETURN_IF_ERROR(wire::read_exact(fd, text.data(), text.size(), deadline));
    return wire::error_status(h, "refused this worker: " + text);
  }
  wire::ShardInfo info;
  const bool spans_ok = h.spans >= 0 && h.spans <= wire::kMaxSpans;
  if (h.op != Op::welcome || !spans_ok ||
      h.payload != sizeof info + static_cast<uint64_t>(h.spans) * sizeof(DataSpan))
    return corrupt_data(std::string("answered hello with ") + wire::op_name(h.op) + " of " +
                        std::to_string(h.payload) + " bytes and " + std::to_string(h.spans) + " data spans");
  TROUPE_RETURN_IF_ERROR(wire::read_exact(fd, &info, sizeof info, deadline).with_context("reading the welcome"));
  TROUPE_RETURN_IF_ERROR(wire::read_spans(fd, h.spans, &welcome->last, deadline).with_context("reading the welcome"));
  welcome->clock = h.clock;
  welcome->version = h.version;
  welcome->last_push = info.last_push;
  return info;
}

// One short try at shard i where o.resolve says it is now (a dial retries refusals until its
// deadline, and the address may change meanwhile): c->address is set and `my_clock` said in the
// hello. *dialled (if given): whether an address was there to dial.
Expected<wire::ShardInfo> dial_resolved(size_t i, Connection* c, const PsClientOptions& o, int64_t my_clock,
                                        Clock::time_point deadline, Welcome* welcome, bool* dialled) {
  if (dialled) *dialled = false;
  auto address = o.resolve(static_cast<int>(i));
  if (!address.ok()) return address.status();
  if (address->empty()) return not_found("no address published");
  if (dialled) *dialled = true;
  c->address = *address;
  PsClientOptions shorter = o;
  shorter.connect_timeout = std::min({o.connect_timeout, std::chrono::milliseconds(kReconnectTry),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())});
  // A server publishes its address once it listens: a published address that refuses is stale (its
  // server died and the replacement has not published yet), so the caller's loop asks again soon
  // rather than this dial retrying the refusal.
  return join(c, shorter, my_clock, welcome, std::chrono::milliseconds(kResolvedDialMs));
}

// A join that failed for want of the server (refused, reset, closed, silent), not by its answer.
bool reachable_later(const Status& st) { return st.code() == Code::unavailable || st.code() == Code::timeout; }

// The first join of shard i failed with `cause`: its server died and the job's supervisor is
// placing a replacement, which publishes its address where resolve looks. Dials again there, with
// backoff, until o.reconnect_timeout or o.cancel; returns the last failure past them.
Expected<wire::ShardInfo> join_when_back(size_t i, Connection* c, const PsClientOptions& o, Welcome* welcome,
                                         const Status& cause) {
  const auto deadline = Clock::now() + o.reconnect_timeout;
  spdlog::warn("worker {}: parameter server {} at {} cannot be reached ({}); waiting up to {:g} s for the job's "
               "supervisor to restore it", o.rank, i, c->address, cause.message(), o.reconnect_timeout.count() / 1000.0);
  auto backoff = std::chrono::milliseconds(50);
  Status last = cause;
  while (Clock::now() < deadline) {
    if (o.cancel && o.cancel->load()) return unavailable("stopped while waiting for it to be restored (" + last.message() + ")");
    bool dialled = false;
    auto info = dial_resolved(i, c, o, 0, deadline, welcome, &dialled);
    if (info.ok() || (dialled && !reachable_later(info.status()))) {
      if (info.ok()) spdlog::info("worker {}: parameter server {} answered at {}", o.rank, i, c->address);
      return info;
    }
    last = info.status();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  return unavailable("not back within " + fmt::format("{:g}", o.reconnect_timeout.count() / 1000.0) +
                     " s; last try: " + last.message() + ". Is the job's supervisor restoring it? See `troupe status` and "
                     "the server node's log");
}

}  // namespace

Expected<std::unique_ptr<PsClient>> connect_ps(const std::vector<std::string>& addresses, const PsClientOptions& o) {
  const std::string self = "worker " + std::to_string(o.rank) + " of job '" + o.job + "'";
  if (addresses.empty()) return invalid_argument(self + ": no parameter-server addresses");
  std::vector<Connection> shards(addresses.size());
  size_t total = 0;
  PsMode mode = PsMode::async;
  std::vector<WorkerPosition> positions(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    shards[i].address = addresses[i];
    Welcome welcome;
    Expected<wire::ShardInfo> info = unavailable("not dialled");
    bool dialled = false;
    if (o.resolve) {
      // Where the shard is now: a replacement worker's addresses may name a server that died with
      // its predecessor (dialling it would retry the refusals for the whole connect timeout).
      info = dial_resolved(i, &shards[i], o, 0, Clock::now() + o.connect_timeout, &welcome, &dialled);
    }
    if (!dialled) {
      shards[i].address = addresses[i];
      info = join(&shards[i], o, 0, &welcome);
    }
    if (!info.ok() && o.resolve && reachable_later(info.status())) info = join_when_back(i, &shards[i], o, &welcome, info.status());
    const std::string where = self + " connecting to shard " + std::to_string(i) + " at " + shards[i].address;
    positions[i] = WorkerPosition{welcome.clock, welcome.last, welcome.last_push};
    shards[i].version = welcome.version;
    shards[i].acked = shards[i].last_push = welcome.last_push;
    if (!info.ok()) return info.status().with_context(where);
    const size_t expected_begin = i == 0 ? 0 : shards[i - 1].range.end;
    if (info->index != static_cast<int32_t>(i) || info->shards != static_cast<int32_t>(addresses.size()) ||
        info->begin != expected_begin || info->end <= info->begin || (i > 0 && info->total != total))
      return invalid_argument(where + ": it is shard " + std::to_string(info->index) + " of " +
                              std::to_string(info->shards) + " holding floats [" + std::to_string(info->begin) + ", " +
                              std::to_string(info->end) + ") of " + std::to_string(info->total) +
                              "; give the addresses of one job's shards, in shard order");
    shards[i].range = ShardRange{info->begin, info->end};
    total = info->total;
    mode = static_cast<PsMode>(info->mode);
  }
  if (shards.back().range.end != total)
    return invalid_argument(self + ": the shards hold floats [0, " + std::to_string(shards.back().range.end) +
                            ") of " + std::to_string(total) + "; a shard's address is missing");
  return std::unique_ptr<PsClient>(new TcpPsClient(std::move(shards), total, mode, o, std::move(positions)));
}

}  // namespace troupe::ps
