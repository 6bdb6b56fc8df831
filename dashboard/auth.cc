#include "dashboard/auth.h"

#include <arpa/inet.h>

#include <cstdint>

namespace troupe::dashboard {
namespace {

// Equal strings, in time that depends only on the lengths (a wrong guess learns nothing else).
bool same(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool is_loopback_address(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  if (::inet_pton(AF_INET6, bare.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

AuthResult check_token(const std::string& authorization, const std::string& query_token, const std::string& token) {
  if (token.empty()) return AuthResult::wrong;  // never accept against an empty secret
  const std::string bearer = "Bearer ";
  const bool has_header = authorization.size() > bearer.size() && authorization.compare(0, bearer.size(), bearer) == 0;
  if (!has_header && query_token.empty()) return AuthResult::missing;
  if (has_header && same(authorization.substr(bearer.size()), token)) return AuthResult::ok;
  if (!query_token.empty() && same(query_token, token)) return AuthResult::ok;
  return AuthResult::wrong;
}

}  // namespace troupe::dashboard
