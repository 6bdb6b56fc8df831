#include "dashboard/api_paging.h"

#include <cctype>

namespace troupe::dashboard::detail {
namespace {

bool is_number(const std::string& s) {
  const size_t digits = s.size() - (!s.empty() && s[0] == '-' ? 1 : 0);
  return digits >= 1 && digits <= 18 &&
         std::all_of(s.end() - static_cast<std::ptrdiff_t>(digits), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_id(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

}  // namespace

std::string Position::text() const {
  std::string out;
  for (int64_t k : keys) out += std::to_string(k) + ".";
  return out + id;
}

std::optional<ParamError> read_page(const QueryParams& q, size_t keys, const std::string& shape, PageRequest* out) {
  if (auto e = q.integer("limit", 1, kMaxLimit, kDefaultLimit, &out->limit)) return e;
  if (auto e = q.integer("offset", 0, kMaxOffset, 0, &out->offset)) return e;
  std::string after;
  if (auto e = q.text("after", 160, &after)) return e;
  out->after.reset();
  if (!q.has("after")) return std::nullopt;
  const std::vector<std::string> parts = split(after, '.');
  const bool shaped = parts.size() == keys + 1 && is_id(parts.back()) &&
                      std::all_of(parts.begin(), parts.end() - 1, is_number);
  if (!shaped) {
    const std::string shown = after.size() > 64 ? after.substr(0, 64) + "..." : after;
    return ParamError{"after", "parameter 'after' is '" + shown + "'; it must be " + shape +
                                   ": the 'next' of the page before"};
  }
  Position p;
  for (size_t i = 0; i < keys; ++i) p.keys.push_back(std::stoll(parts[i]));
  p.id = parts.back();
  for (char& c : p.id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  out->after = std::move(p);
  return std::nullopt;
}

PageSlice slice(const std::vector<Position>& sorted, const PageRequest& page) {
  const size_t first = page.after ? static_cast<size_t>(std::upper_bound(sorted.begin(), sorted.end(), *page.after) -
                                                        sorted.begin())
                                  : 0;
  PageSlice s;
  s.begin = std::min(sorted.size(), first + static_cast<size_t>(page.offset));
  s.end = std::min(sorted.size(), s.begin + static_cast<size_t>(page.limit));
  return s;
}

void describe_page(nlohmann::json& body, const std::vector<Position>& sorted, const PageSlice& s,
                   const PageRequest& page) {
  body["total"] = sorted.size();
  body["start"] = s.begin;
  body["returned"] = s.end - s.begin;
  body["limit"] = page.limit;
  body["truncated"] = s.end < sorted.size();
  if (s.end < sorted.size()) body["next"] = sorted[s.end - 1].text();
}

}  // namespace troupe::dashboard::detail
