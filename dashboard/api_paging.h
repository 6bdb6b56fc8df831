// Paging of the API's long lists (/api/actors, /api/nodes, /api/nodes/<id>, /api/jobs,
// /api/searches): a page is `limit` matches after a cursor (`after`, the `next` of the page before)
// and `offset` more skipped. A cursor is a position in the list's order, not an index, so a page
// neither repeats nor skips the items that stayed when others are added or removed between pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dashboard/api.h"
#include "dashboard/api_params.h"

namespace troupe::dashboard::detail {

// Where an item sits in its list's order: lists are sorted ascending by (keys..., id). Its text —
// the cursor `next` and `after` carry — is the keys and the id joined by '.': an actor's is its id,
// a node's "<0 head, 1 not>.<started_ms>.<id>", a job's "-<submitted_ms>.<id>" (newest first).
struct Position {
  std::vector<int64_t> keys;
  std::string id;

  bool operator<(const Position& o) const { return std::tie(keys, id) < std::tie(o.keys, o.id); }
  std::string text() const;
};

// What one request asks for: `limit` matches, after skipping `offset` matches past the cursor
// `after` (absent: from the start of the list).
struct PageRequest {
  int64_t limit = kDefaultLimit;
  int64_t offset = 0;
  std::optional<Position> after;
};

// Reads `limit` (1 - kMaxLimit), `offset` (0 - kMaxOffset) and `after`: a cursor of `keys` numbers
// and a 32-hex-digit id; `shape` says what it looks like, for the 400 naming the parameter.
constexpr int64_t kMaxOffset = 1000000000;
std::optional<ParamError> read_page(const QueryParams& q, size_t keys, const std::string& shape, PageRequest* out);

// The page's part of the matches (`sorted`, in list order): the indices [begin, end).
struct PageSlice {
  size_t begin = 0, end = 0;
};
PageSlice slice(const std::vector<Position>& sorted, const PageRequest& page);

// Sets `body`'s total (all matches), start (matches before the page), returned, limit, truncated
// (matches follow the page) and, only then, next (the page's last position: the next page's `after`).
void describe_page(nlohmann::json& body, const std::vector<Position>& sorted, const PageSlice& s,
                   const PageRequest& page);

// The page of the `records` that `matches`, in the order of their `position`, each rendered by
// `render` into body[name], and described by describe_page.
template <class Record, class PositionOf, class Matches, class Render>
void page_of(nlohmann::json& body, const char* name, const std::vector<Record>& records, PositionOf position,
             Matches matches, Render render, const PageRequest& page) {
  std::vector<std::pair<Position, const Record*>> items;
  for (const Record& r : records) {
    if (matches(r)) items.emplace_back(position(r), &r);
  }
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Position> sorted;
  sorted.reserve(items.size());
  for (auto& item : items) sorted.push_back(std::move(item.first));
  const PageSlice s = slice(sorted, page);
  body[name] = nlohmann::json::array();
  for (size_t i = s.begin; i < s.end; ++i) body[name].push_back(render(*items[i].second));
  describe_page(body, sorted, s, page);
}

}  // namespace troupe::dashboard::detail
