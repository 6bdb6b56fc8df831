#include "actors/actor_system.h"

#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "actors/messages.h"
#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/atom.hpp"
#include "caf/io/middleman.hpp"
#include "actors/tls_middleman.h"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

namespace troupe::actors {

namespace {
constexpr caf::atom_value kTroupeErrorCategory = caf::atom("troupe");
}  // namespace

caf::error to_error(const Status& status) {
  return caf::error(static_cast<uint8_t>(status.code()), kTroupeErrorCategory,
                    caf::make_message(status.message()));
}

Status ActorSystemOptions::validate() const {
  if (scheduler_policy != "stealing" && scheduler_policy != "sharing") {
    return invalid_argument("actor system: scheduler policy '" + scheduler_policy +
                            "' is unknown; use 'stealing' or 'sharing'");
  }
  if (worker_threads > 1024) {
    return invalid_argument("actor system: " + std::to_string(worker_threads) +
                            " worker threads is too many; use 0 (one per hardware thread) to 1024");
  }
  if (bind_address.empty()) {
    return invalid_argument("actor system: bind address is empty; use 127.0.0.1 or 0.0.0.0");
  }
  if (connect_timeout.count() <= 0) {
    return invalid_argument("actor system: connect timeout must be positive, got " +
                            std::to_string(connect_timeout.count()) + " ms");
  }
  return Status::ok_status();
}

// The config must outlive the system (CAF keeps a reference), so both live here, config first.
struct ActorSystem::Impl {
  ActorSystemOptions options;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::mutex mu;
  std::vector<caf::actor> tracked;
  caf::io::middleman_actor tls_middleman;  // set with TLS: publishes and connects (actors/tls_middleman.h)
};

Expected<std::unique_ptr<ActorSystem>> ActorSystem::start(const ActorSystemOptions& options) {
  TROUPE_RETURN_IF_ERROR(options.validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (!options.tls.enabled()) {
    // The cluster's processes hand their TLS files down in the environment (tls/tls_files.h).
    auto env = tls::files_from_env();
    if (!env.ok()) return env.status();
    impl->options.tls = *env;
  }
  auto& cfg = impl->cfg;
  cfg.set("scheduler.policy", options.scheduler_policy == "sharing" ? caf::atom("sharing")
                                                                     : caf::atom("stealing"));
  if (options.worker_threads > 0) cfg.set("scheduler.max-threads", options.worker_threads);
  cfg.set("logger.console", caf::atom("none"));
  cfg.load<caf::io::middleman>();
  cfg.add_error_category(kTroupeErrorCategory,
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string text = code_name(static_cast<Code>(code));
                           if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
                             text += ": " + ctx.get_as<std::string>(0);
                           }
                           return text;
                         });
  register_message_types(cfg);
  try {
    impl->sys = std::make_unique<caf::actor_system>(cfg);
  } catch (const std::exception& e) {
    return internal_error(std::string("actor system: CAF failed to start: ") + e.what());
  }
  if (impl->options.tls.enabled()) {
    // Every connection of this system (publish and connect alike) under TLS: both ends present a
    // certificate and accept only one of the cluster's CA.
    auto context = tls::TlsContext::load(impl->options.tls);
    if (!context.ok()) return context.status().with_context("actor system");
    impl->tls_middleman = spawn_tls_middleman(*impl->sys, *context);
  }
  return std::unique_ptr<ActorSystem>(new ActorSystem(std::move(impl)));
}

ActorSystem::ActorSystem(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ActorSystem::~ActorSystem() {
  std::vector<caf::actor> tracked;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    tracked.swap(impl_->tracked);
  }
  for (auto& a : tracked) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  tracked.clear();
  // A detached actor of ours: the system waits for it (CAF stops only its own middleman actor).
  if (impl_->tls_middleman) caf::anon_send_exit(impl_->tls_middleman, caf::exit_reason::user_shutdown);
  impl_->tls_middleman = nullptr;
  impl_->sys.reset();  // waits for the system's actors, then stops the middleman and scheduler
}

caf::actor_system& ActorSystem::system() { return *impl_->sys; }
const ActorSystemOptions& ActorSystem::options() const { return impl_->options; }

void ActorSystem::track(const caf::actor& whom) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tracked.push_back(whom);
}

Expected<uint16_t> ActorSystem::publish(const caf::actor& whom) {
  return publish(whom, impl_->options.port);
}

Expected<uint16_t> ActorSystem::publish(const caf::actor& whom, uint16_t port) {
  const std::string& addr = impl_->options.bind_address;
  const std::string where = addr + ":" + std::to_string(port);
  if (!whom) return invalid_argument("cannot publish an invalid actor handle on " + where);
  // SO_REUSEADDR: a process restarted on its fixed port (a head) binds it while connections of its
  // predecessor linger in TIME_WAIT; a port another process listens on is still refused.
  caf::expected<uint16_t> bound{caf::make_error(caf::sec::request_timeout)};
  if (impl_->tls_middleman) {
    caf::scoped_actor self{*impl_->sys};
    self->request(impl_->tls_middleman, std::chrono::seconds(30), caf::publish_atom::value, port,
                  caf::actor_cast<caf::strong_actor_ptr>(whom), impl_->sys->message_types(whom), addr, true)
        .receive([&](uint16_t p) { bound = p; }, [&](caf::error& e) { bound = std::move(e); });
  } else {
    bound = impl_->sys->middleman().publish(whom, port, addr.c_str(), /*reuse=*/true);
  }
  if (!bound) {
    return io_error("cannot publish actor on " + where + ": " + describe(*impl_->sys, bound.error()) +
                    " — is the port in use or the address not local to this host?");
  }
  track(whom);
  return *bound;
}

Expected<caf::actor> ActorSystem::connect(const std::string& host, uint16_t port) {
  return connect(host, port, impl_->options.connect_timeout);
}

Expected<caf::actor> ActorSystem::connect(const std::string& host, uint16_t port,
                                          std::chrono::milliseconds timeout) {
  auto& sys = *impl_->sys;
  const std::string where = host + ":" + std::to_string(port);
  const std::string prefix = "cannot reach node at " + where + " within " + format_duration(timeout);
  // Ask the middleman actor (not middleman().remote_actor(), which blocks without a deadline):
  // the request times out on our side even if the connect itself is still pending.
  Expected<caf::actor> result = internal_error(prefix + ": no answer from the middleman");
  caf::scoped_actor self{sys};
  const caf::io::middleman_actor& connector = impl_->tls_middleman ? impl_->tls_middleman : sys.middleman().actor_handle();
  self->request(connector, timeout, caf::connect_atom::value, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
            if (!ptr) {
              result = not_found("node at " + where +
                                 " is up but has no actor published on that port — is it the "
                                 "node manager's port?");
            } else {
              result = caf::actor_cast<caf::actor>(std::move(ptr));
            }
          },
          [&](caf::error& err) {
            if (err == caf::sec::request_timeout) {
              result = Status(Code::timeout, prefix + ": no answer — is the node running and is " +
                                                 where + " its actor system's address?");
            } else if (err == caf::sec::cannot_connect_to_node && err.context().size() == 1 &&
                       err.context().match_element<std::string>(0)) {
              result = unavailable(prefix + ": " + describe(sys, err));  // the TLS handshake's own words
            } else if (err == caf::sec::cannot_connect_to_node) {
              result = unavailable(prefix + ": connection refused or host unreachable — is the "
                                            "node running?");
            } else {
              result = unavailable(prefix + ": " + describe(sys, err) + " — is the node running?");
            }
          });
  return result;
}

Expected<std::pair<std::string, uint16_t>> parse_host_port(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return invalid_argument("address '" + address + "' is not host:port (e.g. 127.0.0.1:4711)");
  }
  const std::string port_text = address.substr(colon + 1);
  long port = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9' || port > 65535) {
      port = -1;
      break;
    }
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535) {
    return invalid_argument("address '" + address + "': port '" + port_text +
                            "' is not a number in 1..65535");
  }
  return std::make_pair(address.substr(0, colon), static_cast<uint16_t>(port));
}

std::string describe(const caf::actor_system& sys, const caf::error& err) {
  const caf::message& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) return ctx.get_as<std::string>(0);
  return sys.render(err);
}

Status to_status(const caf::actor_system& sys, const caf::error& err, const std::string& what) {
  Code code = Code::internal;
  if (err.category() == kTroupeErrorCategory) {
    code = static_cast<Code>(err.code());
  } else if (err == caf::sec::request_timeout) {
    code = Code::timeout;
  } else if (err == caf::sec::request_receiver_down || err == caf::sec::cannot_connect_to_node ||
             err == caf::sec::no_route_to_receiving_node || err == caf::sec::connection_timeout) {
    code = Code::unavailable;
  }
  return Status(code, what + ": " + describe(sys, err));
}

std::string format_duration(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  std::ostringstream out;
  out << static_cast<double>(ms) / 1000.0 << " s";
  return out.str();
}

}  // namespace troupe::actors
