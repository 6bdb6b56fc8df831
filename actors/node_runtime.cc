#include "actors/node_runtime.h"

#include "actors/node_manager_actor.h"

namespace troupe::actors {

Expected<std::unique_ptr<NodeRuntime>> NodeRuntime::start(const std::string& bind, const NodeId& id,
                                                         std::shared_ptr<const Registry> registry,
                                                         std::shared_ptr<GpuAssignments> gpus) {
  std::unique_ptr<NodeRuntime> rt(new NodeRuntime());
  ActorSystemOptions ao;
  ao.bind_address = bind;
  auto system = ActorSystem::start(ao);
  if (!system.ok()) return system.status();
  rt->system_ = std::move(*system);
  rt->id_ = id;
  NodeManagerOptions nmo;
  nmo.node = id;
  nmo.registry = std::move(registry);
  nmo.gpus = std::move(gpus);
  ActorStateWriter* writer = &rt->writer_;
  nmo.on_state_change = [writer](const ActorStateChange& c) { writer->report(c); };
  nmo.on_shutdown = [flag = rt->shutdown_](const std::string& reason) {
    std::lock_guard<std::mutex> lock(flag->mu);
    flag->reason = reason;
    flag->requested.store(true);
  };
  rt->node_manager_ = spawn_node_manager(rt->system_->system(), nmo);
  auto port = rt->system_->publish(rt->node_manager_);
  if (!port.ok()) return port.status().with_context("publishing the node manager");
  rt->address_ = bind + ":" + std::to_string(*port);
  return rt;
}

bool NodeRuntime::shutdown_requested(std::string* reason) const {
  if (!shutdown_->requested.load()) return false;
  if (reason) {
    std::lock_guard<std::mutex> lock(shutdown_->mu);
    *reason = shutdown_->reason;
  }
  return true;
}

NodeRuntime::~NodeRuntime() {
  stats_.stop();
  system_.reset();  // stops the actors; their last reports are queued in the writer
  writer_.flush(std::chrono::milliseconds(2000));
  writer_.attach(nullptr);
}

void NodeRuntime::attach_store(std::unique_ptr<gcs::Store> store) {
  stats_.stop();
  store_ = std::move(store);
  writer_.attach(store_.get());
  if (store_) stats_.start(store_.get(), id_.hex(), std::chrono::seconds(5));
}

}  // namespace troupe::actors
