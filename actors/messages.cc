#include "actors/messages.h"

#include "actors/head_messages.h"

#include "caf/actor_system_config.hpp"

namespace troupe::actors {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<SpawnRequest>("troupe.spawn_request")
      .add_message_type<SpawnReply>("troupe.spawn_reply")
      .add_message_type<SpawnBatchRequest>("troupe.spawn_batch_request")
      .add_message_type<SpawnBatchReply>("troupe.spawn_batch_reply")
      .add_message_type<LookupRequest>("troupe.lookup_request")
      .add_message_type<LookupReply>("troupe.lookup_reply")
      .add_message_type<ListActorsRequest>("troupe.list_actors_request")
      .add_message_type<LiveActor>("troupe.live_actor")
      .add_message_type<ListActorsReply>("troupe.list_actors_reply")
      .add_message_type<StopRequest>("troupe.stop_request")
      .add_message_type<StopReply>("troupe.stop_reply")
      .add_message_type<ShutdownNode>("troupe.shutdown_node")
      .add_message_type<ShutdownNodeReply>("troupe.shutdown_node_reply")
      .add_message_type<ShutdownNodes>("troupe.shutdown_nodes")
      .add_message_type<NodeShutdown>("troupe.node_shutdown")
      .add_message_type<ShutdownNodesReply>("troupe.shutdown_nodes_reply")
      .add_message_type<TailLogRequest>("troupe.tail_log_request")
      .add_message_type<TailLogReply>("troupe.tail_log_reply")
      .add_message_type<Call>("troupe.call")
      .add_message_type<CallReply>("troupe.call_reply")
      .add_message_type<CallBatch>("troupe.call_batch")
      .add_message_type<CallBatchReply>("troupe.call_batch_reply")
      .add_message_type<Cast>("troupe.cast")
      .add_message_type<CastBatch>("troupe.cast_batch")
      .add_message_type<Ping>("troupe.ping")
      .add_message_type<Heartbeat>("troupe.heartbeat")
      .add_message_type<ActorStateChange>("troupe.actor_state_change")
      .add_message_type<RegisterNode>("troupe.register_node")
      .add_message_type<RegisterReply>("troupe.register_reply")
      .add_message_type<HeartbeatAck>("troupe.heartbeat_ack")
      .add_message_type<SpawnActors>("troupe.spawn_actors")
      .add_message_type<SpawnActorsReply>("troupe.spawn_actors_reply")
      .add_message_type<JobActor>("troupe.job_actor")
      .add_message_type<SubmitJob>("troupe.submit_job")
      .add_message_type<NodeDeclaredDead>("troupe.node_declared_dead")
      .add_message_type<GcsDataLost>("troupe.gcs_data_lost")
      .add_message_type<SubmitJobReply>("troupe.submit_job_reply")
      .add_message_type<StopJob>("troupe.stop_job")
      .add_message_type<StopJobReply>("troupe.stop_job_reply")
      .add_message_type<StopActor>("troupe.stop_actor")
      .add_message_type<StopActorReply>("troupe.stop_actor_reply");
}

}  // namespace troupe::actors
