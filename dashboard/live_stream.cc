#include "dashboard/live_stream.h"

#include <algorithm>
#include <thread>

#include "dashboard/api.h"
#include "gcs/cluster_view.h"
#include "gcs/events.h"

namespace troupe::dashboard {

LiveStream::LiveStream(gcs::Store& store, LiveStreamOptions options, const std::atomic<bool>& stopping)
    : store_(store), options_(options), stopping_(stopping), due_(Clock::now()), last_push_(Clock::time_point::min()) {}

LiveStream::~LiveStream() = default;

std::string LiveStream::message() {
  auto view = gcs::cluster_view(store_, options_.view);
  if (!view.ok()) {
    ApiResponse err = status_response(view.status());
    err.body["status"] = err.status;
    return "event: error\ndata: " + err.body.dump() + "\n\n";
  }
  return "event: cluster\nid: " + std::to_string(++sent_) + "\ndata: " + view->dump() + "\n\n";
}

bool LiveStream::next(const std::function<bool(const std::string&)>& write, const std::function<bool()>& writable) {
  std::string preamble;
  if (!subscribed_) {
    // On the serving thread, so the subscription's connection belongs to this stream alone.
    subscribed_ = true;
    auto sub = store_.subscribe({gcs::kEventStream});
    if (sub.ok()) events_ = std::move(*sub);
    preamble = "retry: 2000\n\n";
  }
  const auto slice = std::chrono::milliseconds(100);
  for (auto now = Clock::now(); now < due_; now = Clock::now()) {
    if (stopping_.load() || !writable()) return false;
    const auto wait = std::min<Clock::duration>(slice, due_ - now);
    if (!events_) {
      std::this_thread::sleep_for(wait);
      continue;
    }
    auto note = events_->next(std::chrono::duration_cast<std::chrono::milliseconds>(wait) +
                              std::chrono::milliseconds(1));
    if (!note.ok()) {
      events_.reset();  // the interval alone from now on
    } else if (note->has_value()) {
      // Something happened (or, with an empty channel, may have been missed): push soon.
      due_ = std::min(due_, std::max(Clock::now(), last_push_ + options_.min_gap));
    }
  }
  if (stopping_.load()) return false;
  last_push_ = Clock::now();
  due_ = last_push_ + options_.interval;
  return write(preamble + message());
}

}  // namespace troupe::dashboard
