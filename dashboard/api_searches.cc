// /api/searches, /api/searches/<id>: hyperparameter searches (`troupe tune`, gcs/search_record.h).
// The list carries what a table row needs (counts by trial state, the best value so far); one
// search is gcs::search_summary_json, exactly what `troupe tune show <id> --json` prints.
#include <algorithm>
#include <cstdint>

#include "dashboard/api_handlers.h"
#include "dashboard/api_paging.h"
#include "gcs/search_record.h"

namespace troupe::dashboard::detail {
namespace {

using nlohmann::json;

// A search id in a path: 4 to 32 lower-case hex digits (a prefix is resolved by gcs::find_search).
std::optional<ParamError> check_search_id(const std::string& id) {
  const bool hex = std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  if (hex && id.size() >= 4 && id.size() <= 32) return std::nullopt;
  const std::string shown = id.size() > 40 ? id.substr(0, 40) + "..." : id;
  return ParamError{"id", "search id '" + shown + "' is not 4 to 32 lower-case hex digits (an id or its prefix)"};
}

}  // namespace

ApiResponse get_searches(gcs::Store& store, const QueryParams& q) {
  if (auto e = q.check_known({"state", "limit", "offset", "after"})) return param_error(*e);
  std::string state;
  PageRequest page;
  if (auto e = q.one_of("state", {"RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}, &state)) return param_error(*e);
  if (auto e = read_page(q, 1, "-<created_ms>.<search id>", &page)) return param_error(*e);
  auto searches = gcs::list_searches(store);
  if (!searches.ok()) return status_response(searches.status());
  ApiResponse r;
  // Newest first, as /api/jobs: the search people look for is usually the one they just started.
  page_of(
      r.body, "searches", *searches,
      [](const gcs::SearchRecord& s) { return Position{{-s.created_ms}, s.id.hex()}; },
      [&](const gcs::SearchRecord& s) { return state.empty() || state == s.state; }, gcs::search_brief_json, page);
  return r;
}

ApiResponse get_search(gcs::Store& store, const QueryParams& q, const std::string& id) {
  if (auto e = q.check_known({})) return param_error(*e);
  if (auto e = check_search_id(id)) return param_error(*e);
  auto found = gcs::find_search(store, id);
  if (!found.ok()) {
    // An ambiguous prefix is the caller's to fix, like a malformed id.
    if (found.status().code() == Code::invalid_argument) return param_error({"id", found.status().message()});
    return status_response(found.status());
  }
  auto search = gcs::get_search(store, *found);
  if (!search.ok()) return status_response(search.status());  // not_found: "no search <id>", 404
  ApiResponse r;
  r.body = gcs::search_summary_json(*search);
  return r;
}

}  // namespace troupe::dashboard::detail
