// A Store held in this process's memory, with the semantics of RedisStore: for unit tests of the
// layers above the GCS (no server needed). Thread-safe; subscriptions see messages published after
// they were made.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "gcs/store.h"

namespace troupe::gcs {

class InMemoryStore final : public Store {
 public:
  Status put(const std::string& table, const std::string& key, const std::string& value) override;
  Expected<bool> put_if_absent(const std::string& table, const std::string& key, const std::string& value) override;
  Expected<bool> compare_and_set(const std::string& table, const std::string& key, const std::string& expected,
                                 const std::string& desired) override;
  Expected<std::optional<std::string>> get(const std::string& table, const std::string& key) override;
  Status remove(const std::string& table, const std::string& key) override;
  Expected<std::vector<std::pair<std::string, std::string>>> get_all(const std::string& table) override;
  Expected<std::vector<std::string>> keys(const std::string& table) override;
  Expected<std::string> append(const std::string& stream, const std::string& value, size_t max_len) override;
  Expected<std::vector<StreamEntry>> read_recent(const std::string& stream, size_t count) override;
  Expected<std::vector<StreamEntry>> read_after(const std::string& stream, const std::string& after_id,
                                               size_t count) override;
  Status publish(const std::string& channel, const std::string& message) override;
  Expected<std::unique_ptr<Subscription>> subscribe(const std::vector<std::string>& channels) override;
  Status ping() override { return {}; }
  std::string describe() const override { return "memory"; }

  // Test hook: makes every later call fail with `unavailable` (a server that went away) until
  // set_down(false).
  void set_down(bool down);

 private:
  struct Inbox;
  friend class InMemorySubscription;
  Status check_up() const;

  mutable std::mutex mu_;
  bool down_ = false;
  std::map<std::string, std::map<std::string, std::string>> tables_;
  std::map<std::string, std::deque<StreamEntry>> streams_;
  uint64_t next_seq_ = 1;
  std::vector<std::weak_ptr<Inbox>> inboxes_;
};

}  // namespace troupe::gcs
