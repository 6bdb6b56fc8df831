#include "tls/tls_files.h"

#include <cstdlib>

namespace troupe::tls {

Expected<TlsFiles> files_from_env() {
  auto get = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  TlsFiles f{get("TROUPE_TLS_CA"), get("TROUPE_TLS_CERT"), get("TROUPE_TLS_KEY")};
  const int set = !f.ca.empty() + !f.cert.empty() + !f.key.empty();
  if (set == 0 || set == 3) return f;
  std::string missing;
  if (f.ca.empty()) missing += " TROUPE_TLS_CA";
  if (f.cert.empty()) missing += " TROUPE_TLS_CERT";
  if (f.key.empty()) missing += " TROUPE_TLS_KEY";
  return invalid_argument("TLS needs the CA, a certificate and its key; not set:" + missing);
}

std::vector<std::string> env_entries(const TlsFiles& f) {
  if (!f.enabled()) return {};
  return {"TROUPE_TLS_CA=" + f.ca, "TROUPE_TLS_CERT=" + f.cert, "TROUPE_TLS_KEY=" + f.key};
}

void set_environment(const TlsFiles& files, bool overwrite) {
  for (const std::string& e : env_entries(files)) {
    const auto eq = e.find('=');
    ::setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), overwrite ? 1 : 0);
  }
}

}  // namespace troupe::tls
