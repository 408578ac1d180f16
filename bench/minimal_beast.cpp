// The cost of HTTP alone: a minimal Boost.Beast server answering every request
// with a fixed 200 of the size of troupe's GET /api/counter reply. Same
// structure as troupe's front (async, keep-alive, one io thread by default).
//   minimal_beast PORT [THREADS]
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class session : public std::enable_shared_from_this<session> {
public:
  explicit session(tcp::socket&& s) : stream_(std::move(s)) {}
  void run() { do_read(); }

private:
  void do_read() {
    req_ = {};
    stream_.expires_after(std::chrono::seconds(60));
    http::async_read(stream_, buffer_, req_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        return self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->respond();
    });
  }
  void respond() {
    res_ = {};
    res_.version(req_.version());
    res_.result(http::status::ok);
    res_.set(http::field::server, "troupe");
    res_.set(http::field::content_type, "application/json");
    res_.keep_alive(req_.keep_alive());
    res_.body() = R"({"count":0})";
    res_.prepare_payload();
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || !self->req_.keep_alive())
        return self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->do_read();
    });
  }
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

void do_accept(tcp::acceptor& acceptor, net::io_context& ioc) {
  acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket s) {
    if (!ec) {
      s.set_option(tcp::no_delay(true), ec);
      std::make_shared<session>(std::move(s))->run();
    }
    do_accept(acceptor, ioc);
  });
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: minimal_beast PORT [THREADS]\n";
    return 2;
  }
  auto port = static_cast<unsigned short>(std::atoi(argv[1]));
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc, {net::ip::make_address("127.0.0.1"), port}};
  do_accept(acceptor, ioc);
  std::cout << "minimal beast listening on http://127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i)
    pool.emplace_back([&] { ioc.run(); });
  ioc.run();
}
