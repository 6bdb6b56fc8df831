// `troupe tls issue --host HOST [--host ...] --out DIR [--name NAME]`: a member certificate of this
// session's cluster CA (made by `troupe up --tls`) for another host, written with the CA certificate
// into DIR — everything that host needs to join: copy DIR there and run `troupe up --address HEAD
// --token T --tls-ca DIR/ca.pem --tls-cert DIR/NAME.pem --tls-key DIR/NAME.key`.
#include <cctype>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/session.h"
#include "tls/pki.h"

namespace troupe::cli {

Runner add_tls_command(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand("tls", "Certificates of a cluster started with `troupe up --tls`");
  cmd->require_subcommand(1);
  auto* issue = cmd->add_subcommand("issue", "Issue a member certificate for another host (run on the head's host)");
  struct Flags {
    std::vector<std::string> hosts;
    std::string out, name;
  };
  auto f = std::make_shared<Flags>();
  issue->add_option("--host", f->hosts, "An address or name the host is reached at (repeat for several)")->required();
  issue->add_option("--out", f->out, "Directory to write NAME.pem, NAME.key (mode 0600) and ca.pem into")->required();
  issue->add_option("--name", f->name, "File name of the certificate (default: the first --host)");
  return [f]() -> int {
    Session s = Session::current();
    const std::string ca_dir = s.dir() + "/tls";
    std::string name = f->name.empty() ? f->hosts.front() : f->name;
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
    auto files = tls::issue_member(ca_dir, f->out, name, f->hosts);
    if (!files.ok()) return report_error("tls issue", files.status());
    std::printf("issued %s (key %s) for", files->cert.c_str(), files->key.c_str());
    for (const std::string& h : f->hosts) std::printf(" %s", h.c_str());
    std::printf("\nCA certificate: %s\non that host: troupe up --address HEAD --token TOKEN --tls-ca %s --tls-cert %s "
                "--tls-key %s (paths where you copied them)\n",
                files->ca.c_str(), files->ca.c_str(), files->cert.c_str(), files->key.c_str());
    return 0;
  };
}

}  // namespace troupe::cli
