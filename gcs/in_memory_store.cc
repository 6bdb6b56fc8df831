#include "gcs/in_memory_store.h"

#include <algorithm>
#include <cstdlib>

namespace troupe::gcs {

struct InMemoryStore::Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> channels;
  std::deque<Notification> queue;
};

class InMemorySubscription final : public Subscription {
 public:
  explicit InMemorySubscription(std::shared_ptr<InMemoryStore::Inbox> inbox) : inbox_(std::move(inbox)) {}
  Expected<std::optional<Notification>> next(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(inbox_->mu);
    if (!inbox_->cv.wait_for(lock, timeout, [&] { return !inbox_->queue.empty(); })) {
      return std::optional<Notification>{};
    }
    Notification n = std::move(inbox_->queue.front());
    inbox_->queue.pop_front();
    return std::optional<Notification>{std::move(n)};
  }

 private:
  std::shared_ptr<InMemoryStore::Inbox> inbox_;
};

void InMemoryStore::set_down(bool down) {
  std::lock_guard<std::mutex> lock(mu_);
  down_ = down;
}

Status InMemoryStore::check_up() const {
  if (down_) return unavailable("in-memory store is down (test hook set_down)");
  return {};
}

Status InMemoryStore::put(const std::string& table, const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  tables_[table][key] = value;
  return {};
}

Expected<bool> InMemoryStore::put_if_absent(const std::string& table, const std::string& key,
                                            const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  return tables_[table].emplace(key, value).second;
}

Expected<bool> InMemoryStore::compare_and_set(const std::string& table, const std::string& key,
                                              const std::string& expected, const std::string& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  auto t = tables_.find(table);
  if (t == tables_.end()) return false;
  auto it = t->second.find(key);
  if (it == t->second.end() || it->second != expected) return false;
  it->second = desired;
  return true;
}

Expected<std::optional<std::string>> InMemoryStore::get(const std::string& table, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  auto t = tables_.find(table);
  if (t == tables_.end()) return std::optional<std::string>{};
  auto it = t->second.find(key);
  if (it == t->second.end()) return std::optional<std::string>{};
  return std::optional<std::string>{it->second};
}

Status InMemoryStore::remove(const std::string& table, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  auto t = tables_.find(table);
  if (t != tables_.end()) t->second.erase(key);
  return {};
}

Expected<std::vector<std::pair<std::string, std::string>>> InMemoryStore::get_all(const std::string& table) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  std::vector<std::pair<std::string, std::string>> out;
  auto t = tables_.find(table);
  if (t != tables_.end()) out.assign(t->second.begin(), t->second.end());
  return out;
}

Expected<std::vector<std::string>> InMemoryStore::keys(const std::string& table) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  std::vector<std::string> out;
  auto t = tables_.find(table);
  if (t != tables_.end()) {
    out.reserve(t->second.size());
    for (const auto& row : t->second) out.push_back(row.first);
  }
  return out;
}

Expected<std::string> InMemoryStore::append(const std::string& stream, const std::string& value, size_t max_len) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  auto& s = streams_[stream];
  // Ids compare as (number) like Redis's "<ms>-<seq>"; a single counter keeps them ordered here.
  StreamEntry e{std::to_string(next_seq_++) + "-0", value};
  s.push_back(e);
  while (max_len > 0 && s.size() > max_len) s.pop_front();
  return e.id;
}

Expected<std::vector<StreamEntry>> InMemoryStore::read_recent(const std::string& stream, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  std::vector<StreamEntry> out;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return out;
  const auto& s = it->second;
  size_t first = s.size() > count ? s.size() - count : 0;
  out.assign(s.begin() + static_cast<std::ptrdiff_t>(first), s.end());
  return out;
}

Expected<std::vector<StreamEntry>> InMemoryStore::read_after(const std::string& stream, const std::string& after_id,
                                                            size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  std::vector<StreamEntry> out;
  auto it = streams_.find(stream);
  if (it == streams_.end()) return out;
  const uint64_t after = after_id.empty() ? 0 : std::strtoull(after_id.c_str(), nullptr, 10);
  for (const StreamEntry& e : it->second) {
    if (std::strtoull(e.id.c_str(), nullptr, 10) > after) out.push_back(e);
    if (out.size() >= count) break;
  }
  return out;
}

Status InMemoryStore::publish(const std::string& channel, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  for (auto& weak : inboxes_) {
    auto inbox = weak.lock();
    if (!inbox) continue;
    std::lock_guard<std::mutex> ilock(inbox->mu);
    if (inbox->channels.count(channel)) {
      inbox->queue.push_back({channel, message});
      inbox->cv.notify_one();
    }
  }
  inboxes_.erase(std::remove_if(inboxes_.begin(), inboxes_.end(), [](const auto& w) { return w.expired(); }),
                 inboxes_.end());
  return {};
}

Expected<std::unique_ptr<Subscription>> InMemoryStore::subscribe(const std::vector<std::string>& channels) {
  std::lock_guard<std::mutex> lock(mu_);
  TROUPE_RETURN_IF_ERROR(check_up());
  auto inbox = std::make_shared<Inbox>();
  inbox->channels.insert(channels.begin(), channels.end());
  inboxes_.push_back(inbox);
  return std::unique_ptr<Subscription>(new InMemorySubscription(inbox));
}

}  // namespace troupe::gcs
