#include "trainers/ps/ps_server.h"
#include "tls/tls_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

namespace troupe::ps {

using wire::Clock;
using wire::Header;
using wire::Op;

Expected<std::unique_ptr<PsServer>> PsServer::start(std::unique_ptr<ParameterShard> shard,
                                                    const PsServerOptions& options) {
  if (!shard) return invalid_argument("PsServer::start: no shard");
  if (options.job.empty() || options.job.size() > wire::kMaxJobId)
    return invalid_argument("parameter server: the job id must have 1 to " + std::to_string(wire::kMaxJobId) +
                            " bytes");
  int port = 0;
  auto listener = wire::listen_on(options.host, options.port, &port);
  if (!listener.ok()) return listener.status().with_context("parameter server for " + shard->describe());
  std::unique_ptr<PsServer> server(new PsServer(std::move(shard), options, std::move(*listener), port));
  server->acceptor_ = std::thread([s = server.get()] { s->accept_loop(); });
  spdlog::info("parameter server of job '{}' serving {} at {}", options.job, server->shard_->describe(),
               server->address());
  return server;
}

PsServer::PsServer(std::unique_ptr<ParameterShard> shard, const PsServerOptions& options, wire::Socket listener,
                   int port)
    : shard_(std::move(shard)),
      options_(options),
      listener_(std::move(listener)),
      port_(port),
      connected_(static_cast<size_t>(shard_->options().workers), false),
      holder_fd_(connected_.size(), -1),
      holder_attempt_(connected_.size(), 0) {}

PsServer::~PsServer() { stop(); }

void PsServer::stop() {
  if (stopping_.exchange(true)) return;
  released_.notify_all();  // a hello waiting for a superseded connection to let go
  shard_->shut_down("the parameter server at " + address() + " stopped");
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // SHUT_RD wakes a thread polling for the next request, and still lets a thread whose pull the
    // shard just failed send that error.
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RD);
    threads.swap(connections_);
  }
  for (auto& t : threads) t.join();
  listener_.reset();
}

std::string PsServer::peer_text(int worker) const {
  return "parameter server " + address() + " (" + shard_->describe() + "), worker " + std::to_string(worker);
}

void PsServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listener_.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int fd = ::accept(listener_.fd(), nullptr, nullptr);
    if (fd < 0) continue;
    wire::tune(fd);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(fd);
      break;
    }
    if (options_.tls) {  // the handshake in the connection's thread: a slow one holds up no other
      connections_.emplace_back([this, fd] { serve_tls(fd); });
      continue;
    }
    open_fds_.insert(fd);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void PsServer::serve_tls(int tcp) {
  auto plain = tls::wrap(tcp, *options_.tls, tls::Role::server, options_.io_timeout, "a worker's connection");
  if (!plain.ok()) {
    spdlog::warn("parameter server {}: refused a connection: {}", address(), plain.status().message());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      ::close(*plain);
      return;
    }
    open_fds_.insert(*plain);
  }
  serve(*plain);
}

int PsServer::admit(int fd) {
  auto deadline = Clock::now() + options_.io_timeout;
  Header h;
  Status st = wire::read_header(fd, &h, deadline);
  if (st.ok() && (h.op != Op::hello || h.payload > wire::kMaxJobId))
    st = corrupt_data(std::string("the first frame is ") + wire::op_name(h.op) + " of " + std::to_string(h.payload) +
                      " bytes, not a hello");
  std::string job(st.ok() ? h.payload : 0, '\0');
  if (st.ok()) st = wire::read_exact(fd, job.data(), job.size(), deadline);
  if (!st.ok()) {
    spdlog::warn("parameter server {}: dropped a connection that did not say hello: {}", address(), st.message());
    return -1;
  }
  const int worker = h.worker;
  Status refusal;
  if (job != options_.job)
    refusal = invalid_argument("worker " + std::to_string(worker) + " of job '" + job +
                               "' reached the parameter server of job '" + options_.job + "' at " + address() +
                               "; check the job's shard addresses");
  else if (worker < 0 || worker >= shard_->options().workers)
    refusal = invalid_argument("worker rank " + std::to_string(worker) + " is outside 0.." +
                               std::to_string(shard_->options().workers - 1) + " of job '" + job + "'");
  int64_t clock = 0;
  const int64_t attempt = h.version;  // the worker's attempt (0 before any restart)
  if (refusal.ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    refusal = take_rank(lock, worker, attempt, deadline);
    if (refusal.ok()) {
      auto rejoined = shard_->rejoin_worker(worker, h.clock);
      if (!rejoined.ok()) {
        refusal = rejoined.status();
      } else {
        connected_[static_cast<size_t>(worker)] = true;
        holder_fd_[static_cast<size_t>(worker)] = fd;
        holder_attempt_[static_cast<size_t>(worker)] = attempt;
        clock = *rejoined;
      }
    }
  }
  deadline = Clock::now() + options_.io_timeout;  // the reply's (take_rank may have waited)
  if (!refusal.ok()) {
    spdlog::warn("parameter server {}: refused a connection: {}", address(), refusal.message());
    (void)wire::write_frame(fd, wire::error_header(refusal), refusal.message().data(), deadline);
    return -1;
  }
  wire::ShardInfo info;
  info.begin = shard_->range().begin;
  info.end = shard_->range().end;
  info.total = shard_->options().total_floats ? shard_->options().total_floats : shard_->range().end;
  info.index = shard_->index();
  info.shards = shard_->options().shards;
  info.workers = shard_->options().workers;
  info.mode = static_cast<int32_t>(shard_->options().mode);
  // Where this rank's last applied push ended: a replacement resumes its predecessor's data there,
  // a worker reconnecting to a restored shard replays its pushes after it.
  const WorkerPosition at = shard_->position(worker);
  const DataTag& last = at.last;
  info.last_push = at.last_clock;
  Header w;
  w.op = Op::welcome;
  w.worker = worker;
  w.clock = clock;  // where this rank's clock goes on (a replacement's: its predecessor's)
  w.version = shard_->version();  // a restored shard's may be below what the worker pulled before
  w.spans = static_cast<int32_t>(std::min<size_t>(last.size(), wire::kMaxSpans));
  const uint64_t tail = static_cast<uint64_t>(w.spans) * sizeof(DataSpan);
  w.payload = sizeof info + tail;
  if (!wire::write_frame(fd, w, &info, deadline, last.data(), tail).ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    release_rank(worker);
    return -1;
  }
  return worker;
}

Status PsServer::take_rank(std::unique_lock<std::mutex>& lock, int worker, int64_t attempt,
                           Clock::time_point deadline) {
  const size_t w = static_cast<size_t>(worker);
  if (!connected_[w]) return {};
  const std::string who = "worker " + std::to_string(worker) + " of job '" + options_.job + "'";
  const int64_t held = holder_attempt_[w];
  if (attempt == held)
    return invalid_argument(who + " is already connected to " + address() + " (attempt " + std::to_string(attempt) +
                            ")");
  if (attempt < held)
    return invalid_argument(who + " of attempt " + std::to_string(attempt) + " was replaced by its attempt " +
                            std::to_string(held) + ", which holds the rank at " + address() +
                            "; this worker is stale and must stop");
  // A later attempt: its predecessor was declared lost (its node dead or cut off) while this
  // server still holds a connection of it that nothing closed. The newcomer wins.
  spdlog::warn("parameter server {}: {} of attempt {} supersedes the connection of attempt {}; closing that one",
               address(), who, attempt, held);
  ::shutdown(holder_fd_[w], SHUT_RDWR);  // wakes its thread, which removes the worker and lets go
  if (!released_.wait_until(lock, deadline, [&] { return !connected_[w] || stopping_; }) || stopping_)
    return unavailable(who + " of attempt " + std::to_string(attempt) + ": the connection of attempt " +
                       std::to_string(held) + " still holds the rank at " + address() +
                       " (a request of it still waits in the shard); try again");
  return {};
}

void PsServer::release_rank(int worker) {
  const size_t w = static_cast<size_t>(worker);
  connected_[w] = false;
  holder_fd_[w] = -1;
  released_.notify_all();
}

void PsServer::serve(int fd) {
  const int worker = admit(fd);
  bool finished = false;
  std::string why = "the connection closed";
  if (worker >= 0) {
    std::vector<float> buffer(shard_->range().size());
    while (!stopping_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;  // idle between requests: check stopping_ again
      Header h;
      size_t got = 0;
      Status st = wire::read_header(fd, &h, Clock::now() + options_.io_timeout, &got);
      if (!st.ok()) {
        if (!(st.code() == Code::unavailable && got == 0))  // a close between frames is not an error
          spdlog::error("{}: closing the connection: {}", peer_text(worker), st.message());
        why = st.message();
        break;
      }
      st = answer(fd, worker, h, &buffer, &finished);
      if (!st.ok()) {
        spdlog::error("{}: closing the connection: {}", peer_text(worker), st.message());
        why = st.message();
        break;
      }
    }
    if (!finished && options_.remove_on_disconnect && !stopping_) shard_->remove_worker(worker, why);
    std::lock_guard<std::mutex> lock(mu_);
    release_rank(worker);
  }
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
  ::close(fd);
}

Status PsServer::answer(int fd, int worker, const Header& h, std::vector<float>* buffer, bool* finished) {
  const auto io_deadline = [this] { return Clock::now() + options_.io_timeout; };
  const size_t range_bytes = buffer->size() * sizeof(float);
  const uint64_t span_bytes = static_cast<uint64_t>(h.spans) * sizeof(DataSpan);
  const bool pushes = h.op == Op::push || h.op == Op::replay;
  const bool sized = pushes ? h.spans >= 0 && h.spans <= wire::kMaxSpans && h.payload == range_bytes + span_bytes
                            : h.payload == 0;
  const bool known = h.op == Op::pull || h.op == Op::pull_final || pushes || h.op == Op::finish || h.op == Op::stats ||
                     h.op == Op::history;
  if (!known || !sized || h.worker != worker)
    return corrupt_data(std::string("a malformed ") + wire::op_name(h.op) + " request (op " +
                        std::to_string(static_cast<int>(h.op)) + ", worker " + std::to_string(h.worker) + ", " +
                        std::to_string(h.payload) + " payload bytes)");
  Header reply;
  reply.worker = worker;
  Status st;
  std::vector<char> body;  // a stats or history reply's payload
  const void* payload = nullptr;
  switch (h.op) {
    case Op::pull:
    case Op::pull_final: {
      auto v = h.op == Op::pull ? shard_->pull(worker, h.clock, buffer->data()) : shard_->pull_final(buffer->data());
      st = v.status();
      if (v.ok()) {
        reply.op = Op::params;
        reply.clock = h.clock;
        reply.version = *v;
        reply.payload = range_bytes;
        payload = buffer->data();
      }
      break;
    }
    case Op::push:
    case Op::replay: {
      const std::string what = std::string(wire::op_name(h.op)) + " of clock " + std::to_string(h.clock);
      TROUPE_RETURN_IF_ERROR(wire::read_exact(fd, buffer->data(), range_bytes, io_deadline())
                                 .with_context("reading a " + what));
      DataTag tag;
      TROUPE_RETURN_IF_ERROR(wire::read_spans(fd, h.spans, &tag, io_deadline())
                                 .with_context("reading the data tag of a " + what));
      auto v = h.op == Op::push ? shard_->push(worker, h.clock, buffer->data(), h.version, tag)
                                : shard_->replay(worker, h.clock, buffer->data(), tag);
      st = v.status();
      reply.op = Op::pushed;
      reply.clock = h.clock;
      reply.version = v.ok() ? *v : 0;
      break;
    }
    case Op::history: {  // this rank's applied pushes after h.clock (push_history.h)
      PushesAfter after = shard_->pushes_after(worker, h.clock);
      if (after.pushes.size() > static_cast<size_t>(wire::kMaxHistory)) {  // more than one reply carries
        after.pushes.resize(static_cast<size_t>(wire::kMaxHistory));
        after.complete = false;
      }
      body = wire::encode_history(after.pushes);
      reply.op = Op::history_reply;
      reply.clock = h.clock;
      reply.version = after.complete ? 1 : 0;
      reply.spans = static_cast<int32_t>(after.pushes.size());
      reply.payload = body.size();
      payload = body.data();
      break;
    }
    case Op::finish:
      st = shard_->finish_worker(worker);
      *finished = st.ok();
      reply.op = Op::finished;
      break;
    default: {  // stats
      const StalenessHistogram hist = shard_->staleness();
      wire::StatsPayload sp{hist.max(), hist.sum(), hist.buckets().size()};
      body.resize(sizeof sp + hist.buckets().size() * sizeof(int64_t));
      std::memcpy(body.data(), &sp, sizeof sp);
      std::memcpy(body.data() + sizeof sp, hist.buckets().data(), hist.buckets().size() * sizeof(int64_t));
      reply.op = Op::stats_reply;
      reply.version = shard_->version();
      reply.payload = body.size();
      payload = body.data();
    }
  }
  if (!st.ok()) {
    reply = wire::error_header(st);
    reply.worker = worker;
    payload = st.message().data();
  }
  return wire::write_frame(fd, reply, payload, io_deadline())
      .with_context(std::string("replying to ") + wire::op_name(h.op));
}

}  // namespace troupe::ps
