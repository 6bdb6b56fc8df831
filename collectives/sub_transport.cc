#include "collectives/sub_transport.h"

#include <memory>
#include <set>

namespace troupe::collectives {

Expected<std::unique_ptr<Transport>> SubTransport::make(Transport& base, std::vector<int> ranks) {
  std::set<int> seen;
  int self = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= base.size() || !seen.insert(r).second)
      return invalid_argument("sub-group rank " + std::to_string(r) + " is out of range or repeated (group of " +
                              std::to_string(base.size()) + ")");
    if (r == base.rank()) self = static_cast<int>(i);
  }
  if (self < 0) return invalid_argument("rank " + std::to_string(base.rank()) + " is not a member of the sub-group");
  return std::unique_ptr<Transport>(new SubTransport(base, std::move(ranks), self));
}

Status SubTransport::check(int peer) const {
  if (peer < 0 || peer >= size())
    return invalid_argument("peer " + std::to_string(peer) + " is not a rank of a sub-group of " +
                            std::to_string(size()));
  return {};
}

Status SubTransport::send(int to, const void* data, size_t bytes, Clock::time_point deadline) {
  TROUPE_RETURN_IF_ERROR(check(to));
  return base_.send(ranks_[to], data, bytes, deadline);
}

Status SubTransport::recv(int from, void* data, size_t bytes, Clock::time_point deadline) {
  TROUPE_RETURN_IF_ERROR(check(from));
  return base_.recv(ranks_[from], data, bytes, deadline);
}

Status SubTransport::send_recv(int to, const void* send_data, size_t send_bytes, int from, void* recv_data,
                               size_t recv_bytes, Clock::time_point deadline) {
  TROUPE_RETURN_IF_ERROR(check(to));
  TROUPE_RETURN_IF_ERROR(check(from));
  return base_.send_recv(ranks_[to], send_data, send_bytes, ranks_[from], recv_data, recv_bytes, deadline);
}

}  // namespace troupe::collectives
