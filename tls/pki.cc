#include "tls/pki.h"

#include <arpa/inet.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tls/tls_context.h"

namespace troupe::tls {
namespace {

struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertFree {
  void operator()(X509* x) const { X509_free(x); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;

Status add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return internal_error("TLS: cannot make the certificate extension '" + value + "': " + openssl_errors());
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return {};
}

// A new certificate for `key` named `cn`, valid from an hour ago for `days`, with a random serial.
CertPtr new_certificate(EVP_PKEY* key, const std::string& cn, long days) {
  CertPtr x(X509_new());
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), days * 24 * 3600);
  X509_set_pubkey(x.get(), key);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("troupe"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return x;
}

// Writes `text` to `path` through a temporary file and a rename, with `mode`.
Status write_file(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return io_error("cannot write " + tmp);
    ::chmod(tmp.c_str(), mode);
    f << text;
    if (!f.flush()) return io_error("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  return {};
}

template <typename Write>
std::string pem(Write write) {
  BIO* bio = BIO_new(BIO_s_mem());
  write(bio);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

Status write_pair(const std::string& dir, const std::string& name, X509* cert, EVP_PKEY* key) {
  TROUPE_RETURN_IF_ERROR(write_file(dir + "/" + name + ".key", pem([&](BIO* b) {
                                      PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
                                    }), 0600));
  return write_file(dir + "/" + name + ".pem", pem([&](BIO* b) { PEM_write_bio_X509(b, cert); }), 0644);
}

Status make_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir + ": " + ec.message());
  ::chmod(dir.c_str(), 0700);
  return {};
}

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Status make_ca(const std::string& dir, const std::string& cluster_name) {
  if (std::filesystem::exists(dir + "/ca.pem")) return invalid_argument("a CA exists already in " + dir);
  TROUPE_RETURN_IF_ERROR(make_dir(dir));
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return internal_error("TLS: cannot make a key: " + openssl_errors());
  CertPtr ca = new_certificate(key.get(), "troupe cluster CA (" + cluster_name + ")", 3650);
  X509_set_issuer_name(ca.get(), X509_get_subject_name(ca.get()));
  TROUPE_RETURN_IF_ERROR(add_ext(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  TROUPE_RETURN_IF_ERROR(add_ext(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign"));
  TROUPE_RETURN_IF_ERROR(add_ext(ca.get(), ca.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(ca.get(), key.get(), EVP_sha256()) == 0) return internal_error("TLS: cannot sign the CA: " + openssl_errors());
  return write_pair(dir, "ca", ca.get(), key.get());
}

Expected<TlsFiles> issue_member(const std::string& ca_dir, const std::string& out_dir, const std::string& name,
                                const std::vector<std::string>& hosts) {
  std::unique_ptr<FILE, int (*)(FILE*)> kf(std::fopen((ca_dir + "/ca.key").c_str(), "r"), &std::fclose);
  std::unique_ptr<FILE, int (*)(FILE*)> cf(std::fopen((ca_dir + "/ca.pem").c_str(), "r"), &std::fclose);
  if (!kf || !cf)
    return not_found("no cluster CA in " + ca_dir + " (ca.pem and ca.key): run this where `troupe up --tls` made it");
  KeyPtr ca_key(PEM_read_PrivateKey(kf.get(), nullptr, nullptr, nullptr));
  CertPtr ca(PEM_read_X509(cf.get(), nullptr, nullptr, nullptr));
  if (!ca_key || !ca) return corrupt_data("the cluster CA in " + ca_dir + " does not read: " + openssl_errors());
  TROUPE_RETURN_IF_ERROR(make_dir(out_dir));
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return internal_error("TLS: cannot make a key: " + openssl_errors());
  CertPtr cert = new_certificate(key.get(), "troupe member " + name, 365);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca.get()));
  TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyAgreement"));
  TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  std::string san;
  for (const std::string& h : hosts) {
    if (h.empty()) continue;
    san += (san.empty() ? "" : ",") + std::string(is_ip(h) ? "IP:" : "DNS:") + h;
  }
  if (!san.empty()) TROUPE_RETURN_IF_ERROR(add_ext(cert.get(), ca.get(), NID_subject_alt_name, san));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0)
    return internal_error("TLS: cannot sign the certificate: " + openssl_errors());
  TROUPE_RETURN_IF_ERROR(write_pair(out_dir, name, cert.get(), key.get()));
  if (std::filesystem::absolute(out_dir) != std::filesystem::absolute(ca_dir)) {
    std::error_code ec;
    std::filesystem::copy_file(ca_dir + "/ca.pem", out_dir + "/ca.pem", std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return io_error("cannot copy the CA certificate into " + out_dir + ": " + ec.message());
  }
  return TlsFiles{out_dir + "/ca.pem", out_dir + "/" + name + ".pem", out_dir + "/" + name + ".key"};
}

Expected<std::string> bundle_of(const TlsFiles& files) {
  std::string out;
  for (const std::string& path : {files.ca, files.cert, files.key}) {
    std::ifstream f(path);
    if (!f) return io_error("cannot read " + path);
    std::stringstream text;
    text << f.rdbuf();
    out += text.str();
    if (!out.empty() && out.back() != '\n') out += '\n';
  }
  return out;
}

Expected<TlsFiles> unpack_bundle(const std::string& text, const std::string& dir) {
  std::vector<std::string> certs;
  std::string key;
  size_t at = 0;
  while ((at = text.find("-----BEGIN ", at)) != std::string::npos) {
    const size_t label_end = text.find("-----", at + 11);
    if (label_end == std::string::npos) break;
    const std::string label = text.substr(at + 11, label_end - at - 11);
    const std::string end_marker = "-----END " + label + "-----";
    const size_t end = text.find(end_marker, label_end);
    if (end == std::string::npos) return invalid_argument("TLS bundle: the " + label + " block has no end");
    const std::string block = text.substr(at, end + end_marker.size() - at) + "\n";
    if (label == "CERTIFICATE") certs.push_back(block);
    else if (label.size() >= 11 && label.compare(label.size() - 11, 11, "PRIVATE KEY") == 0) key = block;
    at = end + end_marker.size();
  }
  if (certs.size() != 2 || key.empty())
    return invalid_argument("TLS bundle: expected the CA certificate, this host's certificate and its private key "
                            "(PEM), found " + std::to_string(certs.size()) + " certificate(s) and " +
                            (key.empty() ? "no key" : "a key"));
  TROUPE_RETURN_IF_ERROR(make_dir(dir));
  TROUPE_RETURN_IF_ERROR(write_file(dir + "/ca.pem", certs[0], 0644));
  TROUPE_RETURN_IF_ERROR(write_file(dir + "/node.pem", certs[1], 0644));
  TROUPE_RETURN_IF_ERROR(write_file(dir + "/node.key", key, 0600));
  return TlsFiles{dir + "/ca.pem", dir + "/node.pem", dir + "/node.key"};
}

}  // namespace troupe::tls
