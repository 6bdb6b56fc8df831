#include "cli/cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <cassert>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>

namespace troupe::cli {
namespace {

bool is_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

// Host names, IPv4 and IPv6 addresses: nothing a shell or ssh would read as syntax or an option.
bool is_host(const std::string& s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' && c != ':' && c != '%') {
      return false;
    }
  }
  return true;
}

// A decimal integer, nothing else: YAML 1.1's octal (010) and hex (0x10) read as typos here.
bool parse_int(const std::string& s, long long* out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data() + (!s.empty() && s[0] == '+'), end, *out);
  return ec == std::errc() && ptr == end && !s.empty();
}

constexpr long long kIntMax = std::numeric_limits<int>::max();

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The shortest decimal text that reads back as `v` ("2", "0.5", "1.25").
std::string format_number(double v) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string expand_home(const std::string& path) {
  const char* home = std::getenv("HOME");
  if (path.rfind("~/", 0) == 0 && home && *home) return std::string(home) + path.substr(1);
  return path;
}

// The key `key` of `map` (for errors about a whole section: its value's mark is a line below), or `map`.
YAML::Node key_node(const YAML::Node& map, const std::string& key) {
  for (const auto& kv : map) {
    if (kv.first.Scalar() == key) return kv.first;
  }
  return map;
}

// A YAML value is present when the key is there with a non-null value (`key:` or `key: ~` is absent).
bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

// Reads one cluster file: every check reports "<file>:<line>: <field>: <what>".
class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  Status error(const YAML::Node& at, const std::string& field, const std::string& what) const {
    const YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    std::string where = file_;
    if (!mark.is_null()) where += ":" + std::to_string(mark.line + 1);
    return invalid_argument(where + ": " + (field.empty() ? "" : field + ": ") + what);
  }

  static std::string shown(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "nothing";
    return "'" + n.Scalar() + "'";
  }

  // `map` must be a mapping whose keys are all in `known`, each once.
  Status check_map(const YAML::Node& map, const std::string& field, std::initializer_list<const char*> known) const {
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    if (!map.IsMap()) return error(map, field, "must be a mapping with keys " + list + ", got " + shown(map));
    std::map<std::string, int> seen;
    for (const auto& kv : map) {
      const std::string key = kv.first.Scalar();
      const std::string path = field.empty() ? key : field + "." + key;
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) return error(kv.first, field, "unknown key '" + key + "'; known: " + list);
      if (seen[key]++) return error(kv.first, path, "appears twice; keep one");
    }
    return {};
  }

  Status get_string(const YAML::Node& n, const std::string& field, std::string* out) const {
    if (!n.IsScalar()) return error(n, field, "must be a string, got " + shown(n));
    *out = n.Scalar();
    return {};
  }

  Status get_int(const YAML::Node& n, const std::string& field, long long lo, long long hi, int* out) const {
    long long v = 0;
    const std::string range = hi == kIntMax ? ">= " + std::to_string(lo)
                                              : "in " + std::to_string(lo) + ".." + std::to_string(hi);
    if (!n.IsScalar() || !parse_int(n.Scalar(), &v) || v < lo || v > hi) {
      return error(n, field, "must be an integer " + range + ", got " + shown(n));
    }
    *out = static_cast<int>(v);
    return {};
  }

  Status get_cpus(const YAML::Node& n, const std::string& field, std::optional<double>* out) const {
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v) || v <= 0) {
      return error(n, field, "must be a number > 0, got " + shown(n));
    }
    *out = v;
    return {};
  }

  Status get_gpus(const YAML::Node& n, const std::string& field, std::optional<int>* out) const {
    int v = 0;
    TROUPE_RETURN_IF_ERROR(get_int(n, field, 0, kIntMax, &v));
    *out = v;
    return {};
  }

  Status get_host(const YAML::Node& n, const std::string& field, std::string* out) const {
    TROUPE_RETURN_IF_ERROR(get_string(n, field, out));
    if (!is_host(*out)) return error(n, field, "'" + *out + "' is not a host name or IP address");
    return {};
  }

  Status load_head(const YAML::Node& n, HeadSpec* head) const {
    TROUPE_RETURN_IF_ERROR(check_map(n, "head", {"bind", "port", "cpus", "gpus"}));
    if (present(n["bind"])) TROUPE_RETURN_IF_ERROR(get_host(n["bind"], "head.bind", &head->bind));
    if (present(n["port"])) TROUPE_RETURN_IF_ERROR(get_int(n["port"], "head.port", 0, 65535, &head->port));
    if (present(n["cpus"])) TROUPE_RETURN_IF_ERROR(get_cpus(n["cpus"], "head.cpus", &head->cpus));
    if (present(n["gpus"])) TROUPE_RETURN_IF_ERROR(get_gpus(n["gpus"], "head.gpus", &head->gpus));
    return {};
  }

  Status load_redis(const YAML::Node& n, RedisSpec* redis) const {
    TROUPE_RETURN_IF_ERROR(check_map(n, "redis", {"address", "password"}));
    if (!present(n["address"])) return error(n, "redis.address", "required (host:port of the redis-server)");
    TROUPE_RETURN_IF_ERROR(get_string(n["address"], "redis.address", &redis->address));
    const auto colon = redis->address.rfind(':');
    long long port = 0;
    if (colon == std::string::npos || !is_host(redis->address.substr(0, colon)) ||
        !parse_int(redis->address.substr(colon + 1), &port) || port < 1 ||
        port > 65535) {
      return error(n["address"], "redis.address", "must be host:port, got '" + redis->address + "'");
    }
    if (present(n["password"])) TROUPE_RETURN_IF_ERROR(get_string(n["password"], "redis.password", &redis->password));
    return {};
  }

  Status load_ssh(const YAML::Node& n, SshSpec* ssh) const {
    TROUPE_RETURN_IF_ERROR(check_map(n, "ssh", {"user", "identity_file", "troupe", "command"}));
    if (present(n["user"])) {
      TROUPE_RETURN_IF_ERROR(get_string(n["user"], "ssh.user", &ssh->user));
      if (!is_host(ssh->user) || ssh->user.find(':') != std::string::npos) {
        return error(n["user"], "ssh.user", "'" + ssh->user + "' is not a user name");
      }
    }
    if (present(n["identity_file"])) {
      TROUPE_RETURN_IF_ERROR(get_string(n["identity_file"], "ssh.identity_file", &ssh->identity_file));
      ssh->identity_file = expand_home(ssh->identity_file);
    }
    if (!present(n["troupe"])) return error(n, "ssh.troupe", "required: the path of troupe on the remote hosts");
    TROUPE_RETURN_IF_ERROR(get_string(n["troupe"], "ssh.troupe", &ssh->troupe));
    if (ssh->troupe.empty()) return error(n["troupe"], "ssh.troupe", "must not be empty");
    if (present(n["command"])) {
      const YAML::Node& c = n["command"];
      if (!c.IsSequence() || c.size() == 0) return error(c, "ssh.command", "must be a non-empty list, got " + shown(c));
      ssh->command.clear();
      for (size_t i = 0; i < c.size(); ++i) {
        ssh->command.emplace_back();
        TROUPE_RETURN_IF_ERROR(get_string(c[i], "ssh.command[" + std::to_string(i) + "]", &ssh->command.back()));
      }
    }
    return {};
  }

  Status load_node_type(const YAML::Node& n, const std::string& field, bool ssh, NodeType* t) const {
    TROUPE_RETURN_IF_ERROR(check_map(n, field, {"name", "count", "cpus", "gpus", "hosts"}));
    if (!present(n["name"])) return error(n, field + ".name", "required ([A-Za-z0-9_-]+)");
    TROUPE_RETURN_IF_ERROR(get_string(n["name"], field + ".name", &t->name));
    if (!is_name(t->name)) return error(n["name"], field + ".name", "must match [A-Za-z0-9_-]+, got '" + t->name + "'");
    if (present(n["cpus"])) TROUPE_RETURN_IF_ERROR(get_cpus(n["cpus"], field + ".cpus", &t->cpus));
    if (present(n["gpus"])) TROUPE_RETURN_IF_ERROR(get_gpus(n["gpus"], field + ".gpus", &t->gpus));
    const bool has_count = present(n["count"]);
    t->count = 1;
    if (has_count) TROUPE_RETURN_IF_ERROR(get_int(n["count"], field + ".count", 0, kIntMax, &t->count));
    const YAML::Node& hosts = n["hosts"];
    if (!ssh) {
      if (present(hosts)) {
        return error(key_node(n, "hosts"), field + ".hosts",
                     "only for provider: ssh; the local provider starts `count` node processes on this machine");
      }
      return {};
    }
    if (!present(hosts) || (hosts.IsSequence() && hosts.size() == 0)) {
      return error(present(hosts) ? hosts : n, field + ".hosts", "required with provider: ssh (one node per host)");
    }
    if (!hosts.IsSequence()) return error(hosts, field + ".hosts", "must be a list of hosts, got " + shown(hosts));
    for (size_t i = 0; i < hosts.size(); ++i) {
      t->hosts.emplace_back();
      TROUPE_RETURN_IF_ERROR(get_host(hosts[i], field + ".hosts[" + std::to_string(i) + "]", &t->hosts.back()));
    }
    if (has_count && static_cast<size_t>(t->count) != t->hosts.size()) {
      return error(n["count"], field + ".count",
                   std::to_string(t->count) + " does not match the " + std::to_string(t->hosts.size()) +
                       " hosts; with provider: ssh each host runs one node, so omit count or make them equal");
    }
    t->count = static_cast<int>(t->hosts.size());
    return {};
  }

  Expected<ClusterSpec> load(const YAML::Node& root) const {
    ClusterSpec spec;
    if (!present(root)) {
      return error(root, "", "the file is empty; it needs at least `provider: local` or `provider: ssh`");
    }
    TROUPE_RETURN_IF_ERROR(check_map(root, "", {"cluster_name", "provider", "head", "redis", "node_types", "ssh"}));
    if (!present(root["provider"])) return error(root, "provider", "required: local or ssh");
    TROUPE_RETURN_IF_ERROR(get_string(root["provider"], "provider", &spec.provider));
    if (spec.provider != "local" && spec.provider != "ssh") {
      return error(root["provider"], "provider", "must be local or ssh, got '" + spec.provider + "'");
    }
    const bool ssh = spec.provider == "ssh";
    if (present(root["cluster_name"])) {
      TROUPE_RETURN_IF_ERROR(get_string(root["cluster_name"], "cluster_name", &spec.name));
      if (!is_name(spec.name)) {
        return error(root["cluster_name"], "cluster_name", "must match [A-Za-z0-9_-]+, got '" + spec.name + "'");
      }
    }
    if (present(root["head"])) TROUPE_RETURN_IF_ERROR(load_head(root["head"], &spec.head));
    if (present(root["redis"])) TROUPE_RETURN_IF_ERROR(load_redis(root["redis"], &spec.redis.emplace()));
    if (ssh && !present(root["ssh"])) return error(root, "ssh", "required with provider: ssh (at least ssh.troupe)");
    if (!ssh && present(root["ssh"])) return error(key_node(root, "ssh"), "ssh", "only for provider: ssh");
    if (ssh) TROUPE_RETURN_IF_ERROR(load_ssh(root["ssh"], &spec.ssh));

    const YAML::Node& types = root["node_types"];
    if (present(types) && !types.IsSequence()) {
      return error(types, "node_types", "must be a list of node types, got " + shown(types));
    }
    for (size_t i = 0; present(types) && i < types.size(); ++i) {
      const std::string field = "node_types[" + std::to_string(i) + "]";
      NodeType t;
      TROUPE_RETURN_IF_ERROR(load_node_type(types[i], field, ssh, &t));
      for (size_t j = 0; j < i; ++j) {
        if (spec.node_types[j].name == t.name) {
          return error(types[i]["name"], field + ".name",
                       "'" + t.name + "' is already the name of node_types[" + std::to_string(j) + "]");
        }
      }
      spec.node_types.push_back(std::move(t));
    }

    // Nodes on other machines cannot reach a head that listens on loopback.
    if (ssh && is_loopback(spec.head.bind)) {
      for (const auto& t : spec.node_types) {
        for (const auto& h : t.hosts) {
          if (is_loopback(h)) continue;
          const YAML::Node& head = root["head"];
          const YAML::Node at = present(head) && present(head["bind"]) ? head["bind"] : root;
          return error(at, "head.bind", spec.head.bind + " is a loopback address, which host " + h +
                                            " cannot reach; set head.bind to this machine's address on their network");
        }
      }
    }
    return spec;
  }

 private:
  std::string file_;
};

}  // namespace

Expected<ClusterSpec> load_cluster_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return not_found(path + ": no such cluster file; see examples/clusters/local.yaml for the format");
  }
  if (std::filesystem::is_directory(path, ec)) return invalid_argument(path + ": is a directory, not a cluster file");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) return io_error(path + ": cannot read the cluster file; check its permissions");
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                            ": YAML syntax error: " + e.msg);
  }
  try {
    return Loader(path).load(root);
  } catch (const YAML::Exception& e) {  // not expected: every access above is checked first
    return invalid_argument(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

std::vector<NodeLaunch> launch_plan(const ClusterSpec& spec) {
  std::vector<NodeLaunch> plan;
  for (const auto& t : spec.node_types) {
    if (spec.provider == "ssh") {
      for (const auto& h : t.hosts) plan.push_back({t.name, h, t.cpus, t.gpus});
    } else {
      for (int i = 0; i < t.count; ++i) plan.push_back({t.name, std::nullopt, t.cpus, t.gpus});
    }
  }
  return plan;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> ssh_join_command(const ClusterSpec& spec, const NodeLaunch& node,
                                          const std::string& head_address, const std::string& token,
                                          const std::vector<std::string>& extra) {
  assert(node.host && "ssh_join_command needs a node with a host (provider: ssh)");
  const std::string host = node.host.value_or("");

  // The remote command: ssh joins its words with spaces for the remote shell, so send one string of
  // single-quoted words. A leading ~/ of the binary's path stays expandable there.
  std::vector<std::string> words{"up", "--address", head_address, "--token", token};
  if (node.cpus) words.insert(words.end(), {"--cpus", format_number(*node.cpus)});
  if (node.gpus) words.insert(words.end(), {"--gpus", std::to_string(*node.gpus)});
  words.insert(words.end(), {"--bind", host});
  words.insert(words.end(), extra.begin(), extra.end());
  const std::string& bin = spec.ssh.troupe;
  std::string remote = bin.rfind("~/", 0) == 0 ? "\"$HOME\"/" + shell_quote(bin.substr(2)) : shell_quote(bin);
  for (const auto& w : words) remote += " " + shell_quote(w);
  return ssh_command(spec, host, remote);
}

std::vector<std::string> ssh_command(const ClusterSpec& spec, const std::string& host, const std::string& remote) {
  std::vector<std::string> argv = spec.ssh.command;
  if (!spec.ssh.identity_file.empty()) argv.insert(argv.end(), {"-i", spec.ssh.identity_file});
  argv.push_back(spec.ssh.user.empty() ? host : spec.ssh.user + "@" + host);
  argv.push_back(remote);
  return argv;
}

}  // namespace troupe::cli
