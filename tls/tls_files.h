// Where a process finds the cluster's TLS files: the CA certificate every peer must be signed by,
// and this process's own certificate and private key. `troupe up --tls` makes them (tls/pki.h) and
// hands them to the processes it starts in the environment (TROUPE_TLS_CA, TROUPE_TLS_CERT,
// TROUPE_TLS_KEY: paths, never contents), so the actors and workers inside a node process use the
// same ones.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace troupe::tls {

struct TlsFiles {
  std::string ca;    // PEM: the cluster's CA certificate
  std::string cert;  // PEM: this process's certificate (signed by the CA)
  std::string key;   // PEM: its private key
  bool enabled() const { return !ca.empty(); }
};

// From the environment: all three variables or none (a cluster without TLS); one or two set is
// invalid_argument naming the missing ones.
Expected<TlsFiles> files_from_env();

// NAME=VALUE entries for a child's environment ({} when not enabled).
std::vector<std::string> env_entries(const TlsFiles& files);

// Puts the files into this process's environment (children inherit them); `overwrite` false keeps
// any already set.
void set_environment(const TlsFiles& files, bool overwrite);

}  // namespace troupe::tls
