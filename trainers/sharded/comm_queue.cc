#include "trainers/sharded/comm_queue.h"

#include <chrono>

namespace troupe {

CommQueue::CommQueue() : thread_([this] { run(); }) {}

CommQueue::~CommQueue() {
  abort();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

CommQueue::Ticket CommQueue::submit(std::function<Status()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  const Ticket t = next_++;
  queue_.emplace_back(t, std::move(task));
  ++pending_;
  work_.notify_one();
  return t;
}

Status CommQueue::wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  if (ticket < 0 || ticket >= next_) return internal_error("CommQueue::wait of a ticket never submitted");
  done_.wait(lock, [&] { return finished_.count(ticket) != 0 || stop_; });
  auto it = finished_.find(ticket);
  if (it == finished_.end()) return unavailable("the communication queue stopped");
  Status st = it->second;
  finished_.erase(it);
  return st;
}

Status CommQueue::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0 || stop_; });
  Status first;
  for (const auto& [ticket, st] : finished_)
    if (first.ok() && !st.ok()) first = st;
  finished_.clear();
  return first;
}

void CommQueue::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ticket, task] : queue_) {
    finished_[ticket] = unavailable("dropped: an earlier step of this replica failed");
    --pending_;
  }
  queue_.clear();
  done_.notify_all();
}

double CommQueue::busy_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void CommQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    auto [ticket, task] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    Status st = task();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lock.lock();
    busy_ += took;
    finished_[ticket] = std::move(st);
    --pending_;
    done_.notify_all();
  }
}

}  // namespace troupe
