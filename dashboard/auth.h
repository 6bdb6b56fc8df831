// Who may read the dashboard. On a loopback address only this machine's users can connect, so no
// token is needed; bound anywhere else, every request must carry the cluster's token (the join
// token of cluster.json): header `Authorization: Bearer <token>` or query `?token=<token>` (the
// page passes the latter on to its API calls, as EventSource cannot set headers).
#pragma once

#include <string>

namespace troupe::dashboard {

// True for 127.0.0.0/8, ::1 and "localhost"; false for everything else, 0.0.0.0 and :: included
// (they listen on every interface).
bool is_loopback_address(const std::string& host);

enum class AuthResult { ok, missing, wrong };

// Checks a request's credentials against `token` (which must not be empty): `authorization` is
// the Authorization header ("" when absent), `query_token` the token parameter ("" when absent).
// Either one matching is enough. Compared in constant time.
AuthResult check_token(const std::string& authorization, const std::string& query_token, const std::string& token);

}  // namespace troupe::dashboard
