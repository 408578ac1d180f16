#include "actors/upload.hpp"

#include <caf/actor_system_config.hpp>

namespace troupe {

void register_upload_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<upload_piece>("troupe.upload_piece");
  cfg.add_message_type<upload_reader_handle>("troupe.upload_reader_handle");
  cfg.add_message_type<upload_source_handle>("troupe.upload_source_handle");
}

}  // namespace troupe
