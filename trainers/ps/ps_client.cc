// The TCP PsClient: one connection per shard. After an I/O failure a connection may be out of step
// in the middle of a frame, so the client refuses every later call, quoting the failure.
#include "trainers/ps/ps_client.h"

#include <algorithm>

#include <cstring>
#include <functional>

#include "trainers/ps/ps_wire.h"

namespace troupe::ps {
namespace {

using wire::Clock;
using wire::Header;
using wire::Op;

struct Connection {
  std::string address;
  wire::Socket socket;
  ShardRange range;
};

class TcpPsClient final : public PsClient {
 public:
  TcpPsClient(std::vector<Connection> shards, size_t total, PsMode mode, const PsClientOptions& o, int64_t start_clock)
      : shards_(std::move(shards)), total_(total), mode_(mode), options_(o), start_clock_(start_clock) {}

  int64_t start_clock() const override { return start_clock_; }
  size_t parameters() const override { return total_; }
  int shards() const override { return static_cast<int>(shards_.size()); }
  PsMode mode() const override { return mode_; }

  Expected<Versions> pull(int64_t clock, float* params) override { return fetch(Op::pull, clock, params); }
  Expected<Versions> pull_final(float* params) override { return fetch(Op::pull_final, 0, params); }

  Status push(int64_t clock, const float* grads, const Versions& pulled) override {
    if (pulled.size() != shards_.size())
      return invalid_argument("push of clock " + std::to_string(clock) + ": " + std::to_string(pulled.size()) +
                              " versions for " + std::to_string(shards_.size()) + " shards");
    const std::string what = "push of clock " + std::to_string(clock);
    return exchange(what, [&](size_t i, Header* h) {
      h->op = Op::push;
      h->clock = clock;
      h->version = pulled[i];
      h->payload = shards_[i].range.size() * sizeof(float);
      return grads + shards_[i].range.begin;
    }, Op::pushed, nullptr, nullptr);
  }

  Status finish() override {
    return exchange("finish", [](size_t, Header* h) -> const void* {
      h->op = Op::finish;
      return nullptr;
    }, Op::finished, nullptr, nullptr);
  }

  Expected<StalenessHistogram> staleness() override {
    StalenessHistogram merged;
    Status st = exchange("reading staleness statistics", [](size_t, Header* h) -> const void* {
      h->op = Op::stats;
      return nullptr;
    }, Op::stats_reply, nullptr, &merged);
    if (!st.ok()) return st;
    return merged;
  }

 private:
  using Fill = std::function<const void*(size_t shard, Header* h)>;

  Expected<Versions> fetch(Op op, int64_t clock, float* params) {
    Versions versions(shards_.size());
    const std::string what = op == Op::pull ? "pull for clock " + std::to_string(clock) : "final pull";
    Status st = exchange(what, [&](size_t, Header* h) -> const void* {
      h->op = op;
      h->clock = clock;
      return nullptr;
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

  // Sends one request to every shard (fill writes its header and returns its payload), then reads
  // every reply of op `expect`; `body` reads a reply's payload, stats replies go into *stats.
  // Returns the first error, after reading every shard's reply so the connections stay in step.
  Status exchange(const std::string& what, const Fill& fill, Op expect,
                  const std::function<Status(size_t, const Header&)>& body, StalenessHistogram* stats) {
    if (!broken_.ok()) return broken_;
    deadline_ = Clock::now() + options_.timeout;
    for (size_t i = 0; i < shards_.size(); ++i) {
      Header h;
      h.worker = options_.rank;
      const void* payload = fill(i, &h);
      Status st = wire::write_frame(shards_[i].socket.fd(), h, payload, deadline_);
      if (!st.ok()) return broken(st.with_context(what + ": sending to " + where(i)));
    }
    Status first;
    for (size_t i = 0; i < shards_.size(); ++i) {
      Header h;
      Status st = wire::read_header(shards_[i].socket.fd(), &h, deadline_);
      if (st.ok() && h.op == Op::error) {
        std::string text(std::min<uint64_t>(h.payload, wire::kMaxErrorText), '\0');
        st = wire::read_exact(shards_[i].socket.fd(), text.data(), text.size(), deadline_);
        if (!st.ok()) return broken(st.with_context(what + ": reading an error from " + where(i)));
        if (first.ok()) first = wire::error_status(h, text).with_context(what + ": " + where(i));
        continue;
      }
      if (st.ok() && h.op != expect)
        st = corrupt_data(std::string("answered with ") + wire::op_name(h.op) + " instead of " + wire::op_name(expect));
      if (st.ok() && body) st = body(i, h);
      if (st.ok() && stats) st = read_stats(i, h, stats);
      if (!st.ok()) return broken(st.with_context(what + ": " + where(i)));
    }
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
  int64_t start_clock_ = 0;
  Clock::time_point deadline_;
  Status broken_;
};

// Dials c->address, says hello and reads its ShardInfo.
Expected<wire::ShardInfo> join(Connection* c, const PsClientOptions& o, int64_t* clock) {
  const auto deadline = Clock::now() + o.connect_timeout;
  auto socket = wire::dial(c->address, deadline);
  if (!socket.ok()) return socket.status();
  c->socket = std::move(*socket);
  const int fd = c->socket.fd();
  Header hello;
  hello.op = Op::hello;
  hello.worker = o.rank;
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
  if (h.op != Op::welcome || h.payload != sizeof info)
    return corrupt_data(std::string("answered hello with ") + wire::op_name(h.op) + " of " +
                        std::to_string(h.payload) + " bytes");
  TROUPE_RETURN_IF_ERROR(wire::read_exact(fd, &info, sizeof info, deadline).with_context("reading the welcome"));
  *clock = h.clock;
  return info;
}

}  // namespace

Expected<std::unique_ptr<PsClient>> connect_ps(const std::vector<std::string>& addresses, const PsClientOptions& o) {
  const std::string self = "worker " + std::to_string(o.rank) + " of job '" + o.job + "'";
  if (addresses.empty()) return invalid_argument(self + ": no parameter-server addresses");
  std::vector<Connection> shards(addresses.size());
  size_t total = 0;
  PsMode mode = PsMode::async;
  int64_t start_clock = 0;
  for (size_t i = 0; i < addresses.size(); ++i) {
    shards[i].address = addresses[i];
    const std::string where = self + " connecting to shard " + std::to_string(i) + " at " + addresses[i];
    int64_t clock = 0;
    auto info = join(&shards[i], o, &clock);
    start_clock = std::max(start_clock, clock);
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
  return std::unique_ptr<PsClient>(new TcpPsClient(std::move(shards), total, mode, o, start_clock));
}

}  // namespace troupe::ps
