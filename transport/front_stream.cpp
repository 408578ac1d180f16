#include "transport/front_stream.hpp"

namespace troupe {

void front_stream::read_some(boost::asio::mutable_buffer buffer, io_handler handler) {
  if (is_tls())
    std::get<1>(s_).async_read_some(buffer, std::move(handler));
  else
    std::get<0>(s_).async_read_some(buffer, std::move(handler));
}

void front_stream::write_some(const io_buffers& buffers, io_handler handler) {
  if (is_tls())
    std::get<1>(s_).async_write_some(buffers, std::move(handler));
  else
    std::get<0>(s_).async_write_some(buffers, std::move(handler));
}

}  // namespace troupe
