#pragma once
/// \file
/// A Beast body that sends `length` bytes of an open file from `offset` (a whole
/// static file, or one Range of it), read a buffer at a time with pread into
/// `buffer` (its session's, reused from file to file): the memory per response
/// is that buffer, whatever the file's size.

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/optional.hpp>

#include <cerrno>
#include <cstdint>
#include <utility>

#include <unistd.h>

namespace troupe {

struct file_range_body {
  /// An open file descriptor (owned: closed with it) and the bytes to send.
  class value_type {
  public:
    value_type() = default;
    value_type(const value_type&) = delete;
    value_type& operator=(const value_type&) = delete;
    value_type(value_type&& o) noexcept
      : fd(std::exchange(o.fd, -1)), offset(o.offset), length(o.length), buffer(o.buffer), buffer_size(o.buffer_size) {}
    value_type& operator=(value_type&& o) noexcept {
      if (this != &o) {
        reset();
        fd = std::exchange(o.fd, -1);
        offset = o.offset;
        length = o.length;
        buffer = o.buffer;
        buffer_size = o.buffer_size;
      }
      return *this;
    }
    ~value_type() { reset(); }
    void reset() {
      if (fd >= 0)
        ::close(fd);
      fd = -1;
      offset = length = 0;
    }

    int fd = -1;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    char* buffer = nullptr;  // set before the write: it outlives it
    std::size_t buffer_size = 0;
  };

  static std::uint64_t size(const value_type& body) { return body.length; }

  class writer {
  public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool isRequest, class Fields>
    writer(boost::beast::http::header<isRequest, Fields>&, value_type& body)
      : body_(body), next_(body.offset), remain_(body.length) {}

    void init(boost::beast::error_code& ec) { ec = {}; }

    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec) {
      if (remain_ == 0) {
        ec = {};
        return boost::none;
      }
      auto want = static_cast<std::size_t>(remain_ < body_.buffer_size ? remain_ : body_.buffer_size);
      ssize_t n;
      do
        n = ::pread(body_.fd, body_.buffer, want, static_cast<off_t>(next_));
      while (n < 0 && errno == EINTR);
      if (n <= 0) {  // an error, or the file shrank under us: the response cannot be completed
        ec = n < 0 ? boost::beast::error_code(errno, boost::system::generic_category())
                   : boost::beast::error_code(boost::asio::error::eof);
        return boost::none;
      }
      next_ += static_cast<std::uint64_t>(n);
      remain_ -= static_cast<std::uint64_t>(n);
      ec = {};
      return {{const_buffers_type(body_.buffer, static_cast<std::size_t>(n)), remain_ > 0}};
    }

  private:
    value_type& body_;
    std::uint64_t next_;
    std::uint64_t remain_;
  };
};

}  // namespace troupe
