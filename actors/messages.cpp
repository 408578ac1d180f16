#include "actors/messages.hpp"

#include "actors/census.hpp"
#include "actors/channel.hpp"
#include "actors/commander.hpp"
#include "actors/deposit.hpp"
#include "actors/errors.hpp"
#include "actors/orchestrator.hpp"
#include "actors/stream.hpp"
#include "actors/tell.hpp"
#include "actors/upload.hpp"
#include "actors/worker_process.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

namespace troupe {

http_response error_response(std::uint16_t status, const std::string& text, std::uint32_t retry_after) {
  http_response r;
  r.status = status;
  r.body = error_body(text);
  r.retry_after = retry_after;
  return r;
}

void register_types(caf::actor_system_config& cfg) {
  register_errors(cfg);
  cfg.add_message_type<user_message>("troupe.user_message");  // messages between users (actors/tell.hpp)
  cfg.add_message_type<tell_reply>("troupe.tell_reply");
  cfg.add_message_type<http_header>("troupe.http_header");
  cfg.add_message_type<std::vector<http_header>>("troupe.http_headers");
  cfg.add_message_type<http_request>("troupe.http_request");
  cfg.add_message_type<http_response>("troupe.http_response");
  cfg.add_message_type<placement>("troupe.placement");
  cfg.add_message_type<attach_order>("troupe.attach_order");
  cfg.add_message_type<admission_report>("troupe.admission_report");
  cfg.add_message_type<worker_vitals>("troupe.worker_vitals");
  cfg.add_message_type<group_tuning>("troupe.group_tuning");
  cfg.add_message_type<orchestration_request>("troupe.orchestration_request");
  cfg.add_message_type<orchestration_answer>("troupe.orchestration_answer");
  cfg.add_message_type<settings_generation>("troupe.settings_generation");
  cfg.add_message_type<settings_ack>("troupe.settings_ack");
  cfg.add_message_type<settings_member_handle>("troupe.settings_member_handle");
  cfg.add_message_type<settings_leader_handle>("troupe.settings_leader_handle");
  cfg.add_message_type<worker_hello>("troupe.worker_hello");
  cfg.add_message_type<worker_process_handle>("troupe.worker_process_handle");
  cfg.add_message_type<login_request>("troupe.login_request");
  cfg.add_message_type<user_handle>("troupe.user_handle");
  cfg.add_message_type<channel_push>("troupe.channel_push");
  cfg.add_message_type<channel_ref>("troupe.channel_ref");
  cfg.add_message_type<channel_binding>("troupe.channel_binding");
  cfg.add_message_type<std::vector<channel_binding>>("troupe.channel_bindings");
  cfg.add_message_type<channel_handle>("troupe.channel_handle");
  cfg.add_message_type<channel_owner_handle>("troupe.channel_owner_handle");
  cfg.add_message_type<worker_handle>("troupe.worker_handle");
  cfg.add_message_type<std::vector<worker_handle>>("troupe.worker_actors");
  // A worker's scan answer (its users' owner epochs): not a CAF builtin, and a new
  // commander on another member reads it (unregistered, it arrived empty).
  cfg.add_message_type<std::vector<std::uint64_t>>("troupe.owner_epochs");
  cfg.add_message_type<group_handle>("troupe.group_handle");
  cfg.add_message_type<commander_handle>("troupe.commander_handle");
  cfg.add_message_type<global_store_handle>("troupe.global_store_handle");
  cfg.add_message_type<detail::global_op>("troupe.global_op");
  cfg.add_message_type<detail::global_reply>("troupe.global_reply");
  cfg.add_message_type<store::parcel>("troupe.parcel");
  cfg.add_message_type<std::vector<store::parcel>>("troupe.parcels");
  cfg.add_message_type<store::parcel_kind>("troupe.parcel_kind");
  cfg.add_message_type<deposit_handle>("troupe.deposit_handle");
  cfg.add_message_type<census_note>("troupe.census_note");
  cfg.add_message_type<actor_probe>("troupe.actor_probe");
  cfg.add_message_type<census_query>("troupe.census_query");
  cfg.add_message_type<orchestration_entry>("troupe.orchestration_entry");
  cfg.add_message_type<census_handle>("troupe.census_handle");
  cfg.add_message_type<census_member_view>("troupe.census_member_view");
  cfg.add_message_type<probe_handle>("troupe.probe_handle");
  register_stream_types(cfg);
  register_upload_types(cfg);
}

}  // namespace troupe
