// The query parameters of one API request, checked: every malformed value is an error naming the
// parameter and what it takes, so the API answers 400 instead of guessing. Parameters are read
// once each; a parameter the endpoint does not take is refused (a typo should not silently widen
// a filter).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::dashboard {

// What is wrong with one parameter: the API answers 400 with both ({"error", "parameter"}).
struct ParamError {
  std::string parameter;
  std::string message;
};

class QueryParams {
 public:
  // `params`: name -> value as the HTTP layer decoded them (a name may repeat).
  explicit QueryParams(std::multimap<std::string, std::string> params) : params_(std::move(params)) {}

  // Whether the request names the parameter (with any value, "" included).
  bool has(const std::string& name) const { return params_.count(name) > 0; }
  // Fails naming the first parameter not in `known` ("token" is always allowed: it authenticates).
  std::optional<ParamError> check_known(const std::vector<std::string>& known) const;
  // An integer in [min, max], `fallback` when absent. Not a plain decimal, repeated, or out of
  // range: an error naming the parameter and the range.
  std::optional<ParamError> integer(const std::string& name, int64_t min, int64_t max, int64_t fallback,
                                    int64_t* out) const;
  // The text of a parameter, "" when absent; repeated or longer than `max_len` is an error.
  std::optional<ParamError> text(const std::string& name, size_t max_len, std::string* out) const;
  // A hex prefix of an id (1 to 32 hex digits, any case; returned lower case), "" when absent.
  std::optional<ParamError> hex_prefix(const std::string& name, std::string* out) const;
  // One of `allowed` (compared without case; returned as written in `allowed`), "" when absent.
  std::optional<ParamError> one_of(const std::string& name, const std::vector<std::string>& allowed,
                                   std::string* out) const;

 private:
  std::multimap<std::string, std::string> params_;
};

}  // namespace troupe::dashboard
