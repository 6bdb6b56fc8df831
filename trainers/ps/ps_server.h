// A TCP server hosting one parameter shard (parameter_shard.h) for the workers of one job; the
// protocol is in ps_wire.h. How a job hosts a shard:
//
//   auto shard = ParameterShard::create(i, ranges[i], slice_of_init_parameters, shard_options(...));
//   (or make_job_shard(options, data_spec, shape, i), ps_job.h, which does all of that)
//   PsServerOptions so;  so.job = job_id;
//   auto server = PsServer::start(std::move(*shard), so);   // listening now
//   publish((*server)->address());                           // "127.0.0.1:40123", workers dial it
//   ... (*server)->shard().pull_final(...) for the result; (*server)->stop() (or destroy it).
//
// Threads: one accepting, one per connection (a job has few workers). A connection must say
// hello (job id, worker rank, the worker's attempt) within io_timeout; another job's id or a rank
// out of range is refused with an error frame naming the reason. A rank holds one connection: a
// hello of a later attempt supersedes the one that holds it (a replaced worker's connection the
// server cannot yet know is dead: its host cut off, no FIN ever comes), which is closed first and
// its worker removed, then the newcomer admitted in its place; a hello of the same attempt is
// refused as already connected, one of an earlier attempt as replaced. A malformed frame closes
// only that connection, logged. A worker whose connection drops before it said finish is removed
// from the shard (remove_on_disconnect), so it does not block the others.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tls/tls_context.h"
#include "core/status.h"
#include "trainers/ps/parameter_shard.h"
#include "trainers/ps/ps_wire.h"

namespace troupe::ps {

struct PsServerOptions {
  std::string job;                 // the job id; a client naming another job is refused
  std::string host = "127.0.0.1";  // where to listen
  int port = 0;                    // 0: any free port (address() says which)
  std::chrono::milliseconds io_timeout{10000};  // a hello, or the rest of a started frame
  bool remove_on_disconnect = true;
  // Set: workers connect with TLS (tls/tls_relay.h), a certificate of the cluster's CA required.
  std::shared_ptr<const tls::TlsContext> tls = nullptr;
};

class PsServer {
 public:
  // Listens and starts serving `shard`. Errors: io_error (cannot listen), invalid_argument.
  static Expected<std::unique_ptr<PsServer>> start(std::unique_ptr<ParameterShard> shard,
                                                   const PsServerOptions& options);
  ~PsServer();  // stop()
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  std::string address() const { return options_.host + ":" + std::to_string(port_); }
  ParameterShard& shard() { return *shard_; }
  // Stops accepting, shuts the shard down (waiting pulls fail), closes every connection and joins
  // every thread. Idempotent.
  void stop();

 private:
  PsServer(std::unique_ptr<ParameterShard> shard, const PsServerOptions& options, wire::Socket listener, int port);
  void accept_loop();
  void serve(int fd);
  void serve_tls(int tcp);  // the TLS handshake, then serve() on the plaintext
  // The worker a hello on `fd` names, or -1 after refusing it.
  int admit(int fd);
  // Under mu_: makes rank `worker` free for a hello of `attempt` on `fd` — closes a connection of
  // an earlier attempt that holds it and waits (until `deadline`) for its thread to let go.
  // Returns the refusal (unavailable: the holder did not let go in time, try again) or ok.
  Status take_rank(std::unique_lock<std::mutex>& lock, int worker, int64_t attempt,
                   wire::Clock::time_point deadline);
  // Under mu_: rank `worker`'s connection is gone.
  void release_rank(int worker);
  // Answers one request. An error means the connection must close (a malformed frame, a failed
  // read or reply); a failed request itself is answered with an error frame and returns ok.
  Status answer(int fd, int worker, const wire::Header& h, std::vector<float>* buffer, bool* finished);
  std::string peer_text(int worker) const;

  std::unique_ptr<ParameterShard> shard_;
  const PsServerOptions options_;
  wire::Socket listener_;
  const int port_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
  std::set<int> open_fds_;      // to wake their threads on stop()
  // Per worker rank: whether a connection holds it, that connection's fd and its worker's attempt.
  std::vector<bool> connected_;
  std::vector<int> holder_fd_;
  std::vector<int64_t> holder_attempt_;
  std::condition_variable released_;  // a rank let go
};

}  // namespace troupe::ps
