// The live stream of /api/stream: server-sent events, each one the whole cluster document
// (gcs::cluster_view, as /api/cluster), pushed every `interval` and at once when an event is
// recorded (a node died or joined, an actor exited, a job moved): the stream subscribes to the
// GCS's "events" channel. Pushes caused by events are at least `min_gap` apart, so a burst of
// events costs one document. Internal to the dashboard; dashboard_server.cc feeds it to the HTTP
// server's chunked writer.
//
//   retry: 2000                                   (once: the browser's reconnect delay)
//   event: cluster / id: <n> / data: <document>   (every push)
//   event: error / data: {"error": "...", "status": 503}   (when the GCS did not answer; the stream
//                                                 stays open and tries again at the next push)
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "gcs/cluster_view.h"
#include "gcs/store.h"

namespace troupe::dashboard {

struct LiveStreamOptions {
  std::chrono::milliseconds interval{1000};  // dashboard_stream_interval_ms
  std::chrono::milliseconds min_gap{200};    // between two pushes caused by events
  gcs::ViewOptions view;                     // what each document holds (recent events, actor entries)
};

class LiveStream {
 public:
  // `stopping` is the server's flag: once set, next() returns within ~100 ms.
  LiveStream(gcs::Store& store, LiveStreamOptions options, const std::atomic<bool>& stopping);
  ~LiveStream();

  // Waits until the next document is due (or `writable` says the client left, or the server is
  // stopping), then writes it with `write`. Returns false when the stream should end.
  bool next(const std::function<bool(const std::string&)>& write, const std::function<bool()>& writable);

 private:
  using Clock = std::chrono::steady_clock;
  std::string message();  // the next SSE message: a document or an error

  gcs::Store& store_;
  LiveStreamOptions options_;
  const std::atomic<bool>& stopping_;
  std::unique_ptr<gcs::Subscription> events_;  // null: interval only (subscribing failed)
  bool subscribed_ = false;                    // subscribing was tried
  Clock::time_point due_;                      // when the next push is due
  Clock::time_point last_push_;
  uint64_t sent_ = 0;
};

}  // namespace troupe::dashboard
