#include "tls/tls_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <mutex>

namespace troupe::tls {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

Expected<X509*> read_certificate(const std::string& path, const std::string& what) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "r"));
  if (!f) return io_error("cannot read the " + what + " " + path);
  X509* x = PEM_read_X509(f.get(), nullptr, nullptr, nullptr);
  if (!x) return corrupt_data("the " + what + " " + path + " is not a PEM certificate: " + openssl_errors());
  return x;
}

// The certificate at `cert` is signed by the CA at `ca` and valid now.
Status check_chain(const TlsFiles& files) {
  auto ca = read_certificate(files.ca, "cluster CA certificate");
  if (!ca.ok()) return ca.status();
  auto cert = read_certificate(files.cert, "certificate");
  if (!cert.ok()) {
    X509_free(*ca);
    return cert.status();
  }
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, *ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, *cert, nullptr);
  const int ok = X509_verify_cert(ctx);
  const int err = X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(*cert);
  X509_free(*ca);
  if (ok == 1) return {};
  return invalid_argument("the certificate " + files.cert + " is not valid for the cluster CA " + files.ca + ": " +
                          X509_verify_cert_error_string(err) +
                          " — use a certificate the cluster's CA issued (`troupe tls issue` on the head's host)");
}

SSL_CTX* make_context(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (!ctx) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_num_tickets(ctx, 0);  // no session resumption: every connection authenticates afresh
  SSL_CTX_set_read_ahead(ctx, 1);    // read the socket in large chunks, not a record header at a time
  SSL_CTX_set_default_read_buffer_len(ctx, 1 << 17);
  return ctx;
}

Status configure(SSL_CTX* ctx, const TlsFiles& files) {
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return invalid_argument("cannot load the cluster CA certificate " + files.ca + ": " + openssl_errors());
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    return invalid_argument("cannot load the certificate " + files.cert + ": " + openssl_errors());
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid_argument("cannot load the private key " + files.key + ": " + openssl_errors());
  if (SSL_CTX_check_private_key(ctx) != 1)
    return invalid_argument("the private key " + files.key + " does not belong to the certificate " + files.cert);
  // Tell clients which CA to present a certificate of.
  if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.ca.c_str())) SSL_CTX_set_client_CA_list(ctx, names);
  return {};
}

}  // namespace

std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out;
}

Expected<std::shared_ptr<const TlsContext>> TlsContext::load(const TlsFiles& files) {
  if (!files.enabled()) return invalid_argument("TLS: no cluster CA certificate given");
  TROUPE_RETURN_IF_ERROR(check_chain(files));
  std::shared_ptr<TlsContext> c(new TlsContext());
  c->files_ = files;
  c->client_ = make_context(false);
  c->server_ = make_context(true);
  if (!c->client_ || !c->server_) return internal_error("TLS: OpenSSL cannot make a context: " + openssl_errors());
  TROUPE_RETURN_IF_ERROR(configure(c->client_, files));
  TROUPE_RETURN_IF_ERROR(configure(c->server_, files));
  return std::shared_ptr<const TlsContext>(std::move(c));
}

TlsContext::~TlsContext() {
  SSL_CTX_free(client_);
  SSL_CTX_free(server_);
}

Expected<std::shared_ptr<const TlsContext>> process_tls() {
  static std::once_flag once;
  static Expected<std::shared_ptr<const TlsContext>> loaded = std::shared_ptr<const TlsContext>();
  std::call_once(once, [] {
    auto files = files_from_env();
    if (!files.ok()) {
      loaded = files.status();
    } else if (files->enabled()) {
      loaded = TlsContext::load(*files);
    }
  });
  return loaded;
}

}  // namespace troupe::tls
