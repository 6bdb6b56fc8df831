// OpenSSL contexts for the cluster's connections, both ends authenticated: each side presents its
// certificate and accepts only a peer whose certificate chains to the cluster's CA (TLS 1.3 only;
// no host name check — the CA is the cluster's own, so holding one of its certificates is what
// makes a process a member, wherever it runs). Loading checks the files as a user would want them
// checked: readable PEM, the key matching the certificate, the certificate signed by the CA and
// valid now; each error names the file and what to do.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "tls/tls_files.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace troupe::tls {

class TlsContext {
 public:
  static Expected<std::shared_ptr<const TlsContext>> load(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* client() const { return client_; }
  SSL_CTX* server() const { return server_; }
  const TlsFiles& files() const { return files_; }

 private:
  TlsContext() = default;
  TlsFiles files_;
  SSL_CTX* client_ = nullptr;
  SSL_CTX* server_ = nullptr;
};

// This process's cluster TLS, loaded once from the environment (tls_files.h); null when the cluster
// runs without TLS. An error (a variable missing, a bad file) is returned on every call.
Expected<std::shared_ptr<const TlsContext>> process_tls();

// OpenSSL's queued errors as one line ("" when none); clears the queue.
std::string openssl_errors();

}  // namespace troupe::tls
