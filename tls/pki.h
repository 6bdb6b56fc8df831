// The cluster's own certificate authority, made by `troupe up --tls`: an EC P-256 CA (10 years)
// and member certificates it signs (1 year; usable as TLS server and client; subjectAltName = the
// addresses and names a browser or Prometheus reaches that member at). Files are written PEM,
// private keys with mode 0600, each through a temporary file and a rename.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "tls/tls_files.h"

namespace troupe::tls {

// Makes `dir`/ca.pem and `dir`/ca.key (dir created 0700). Fails if ca.pem exists already.
Status make_ca(const std::string& dir, const std::string& cluster_name);

// Issues `out_dir`/NAME.pem + NAME.key signed by the CA in `ca_dir`, for `hosts` (IP addresses
// or DNS names, into subjectAltName), and copies the CA certificate beside them as ca.pem so the
// directory is all a member on another host needs. Returns the three paths.
Expected<TlsFiles> issue_member(const std::string& ca_dir, const std::string& out_dir, const std::string& name,
                                const std::vector<std::string>& hosts);

// One text holding a member's three files, for handing them to another host over a channel that is
// already secret (ssh's stdin): the CA certificate, the member's certificate, its private key, PEM.
Expected<std::string> bundle_of(const TlsFiles& files);
// Writes a bundle's three parts into `dir` (0700) as ca.pem, node.pem, node.key (0600) and returns
// their paths; invalid_argument naming what is missing when the text is not such a bundle.
Expected<TlsFiles> unpack_bundle(const std::string& text, const std::string& dir);

}  // namespace troupe::tls
