#include "transport/upload_source.hpp"

#include <caf/all.hpp>

namespace troupe {

namespace {

struct upload_source_state {
  static inline const char* name = "troupe.upload_source";
  std::shared_ptr<upload_port> port;
  upload_reader_handle reader;
  std::uint64_t id = 0;
  std::uint64_t credit = 0;  // bytes the reader may still be sent
  bool reading = false;      // one read in flight at most

  // Reads on while the reader has credit left.
  void read_on() {
    if (reading || credit == 0)
      return;
    reading = true;
    port->read(credit);
  }
};

upload_source_actor::behavior_type upload_source_impl(upload_source_actor::stateful_pointer<upload_source_state> self,
                                                      std::shared_ptr<upload_port> port) {
  self->state.port = std::move(port);
  self->set_down_handler([self](caf::down_msg&) {  // its reader is gone: nobody takes the rest
    self->state.port->stop();
    self->quit();
  });
  return {
    [self](upload_atom, upload_reader_handle& reader, std::uint64_t id, std::uint64_t credit) {
      auto& st = self->state;
      if (credit == 0) {
        st.port->stop();
        return self->quit();
      }
      if (!st.reader && reader) {
        st.reader = std::move(reader);
        st.id = id;
        self->monitor(st.reader);
      }
      st.credit += credit;
      st.read_on();
    },
    [self](upload_atom, upload_piece& piece) {
      auto& st = self->state;
      st.reading = false;
      st.credit -= std::min<std::uint64_t>(st.credit, piece.bytes.size());
      bool ends = piece.last || !piece.aborted.empty();
      piece.id = st.id;
      if (st.reader)
        self->send(st.reader, upload_atom::value, std::move(piece));
      if (ends)
        return self->quit();
      st.read_on();  // the next piece while the reader takes this one, within its credit
    },
  };
}

}  // namespace

upload_source_actor spawn_upload_source(caf::actor_system& sys, std::shared_ptr<upload_port> port) {
  return sys.spawn(upload_source_impl, std::move(port));
}

}  // namespace troupe
