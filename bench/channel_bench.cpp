// channel_bench: the figures of page channels (issue 14, "Measured"), against the
// real node (build/bin/troupe through tests/support/node_process), on loopback:
//
//   channel_bench [--seconds S] [--rounds R] [--sockets N]
//
//  rt      GET /api/counter as channel calls over 64 WebSockets against the same
//          over 64 HTTP keep-alive connections, S seconds each, alternating ABAB
//          for R rounds in one run: calls/s of each and the ratio ws/http.
//  memory  N users (one page each, logged in as fan<i>) with no socket, then the
//          same N with a socket each and their page's channel open: the node's
//          ΔRSS / N (the kernel's socket buffers are not in its RSS).
//  fanout  one POST /api/push_users pushing to those N users' pages: the time from
//          the request until every socket has read its push (and the answer's
//          delivered count), R times.
//
// One client thread drives every socket asynchronously (Beast on one
// io_context), so the node is measured, not a pile of client threads. Prints a
// Markdown table, then one JSON line. Exit code 1 when a call fails.
#include "../tests/support/http_client.hpp"
#include "../tests/support/node_process.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using steady = std::chrono::steady_clock;
using namespace troupe::test;

namespace {

struct options {
  double seconds = 3;
  int rounds = 3;
  int sockets = 10000;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    double v = std::atof(argv[i + 1]);
    if (v <= 0) {
      std::cerr << "channel_bench: " << a << " needs a positive number\n";
      std::exit(2);
    }
    if (a == "--seconds")
      o.seconds = v;
    else if (a == "--rounds")
      o.rounds = static_cast<int>(v);
    else if (a == "--sockets")
      o.sockets = static_cast<int>(v);
    else {
      std::cerr << "usage: channel_bench [--seconds S] [--rounds R] [--sockets N]\n";
      std::exit(2);
    }
  }
  return o;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      return std::atol(line.c_str() + 6);
  return -1;
}

void raise_fd_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) == 0 && l.rlim_cur < l.rlim_max) {
    l.rlim_cur = l.rlim_max;
    setrlimit(RLIMIT_NOFILE, &l);
  }
}

// One user of the bench: his cookie, his page.
struct visitor {
  std::string cid;
  std::string page = "p1";
};

// A guest (or a logged-in fan<i>) with one page, made over HTTP.
visitor make_visitor(std::uint16_t port, const std::string& login) {
  http_client c(port);
  headers_t page{{"X-Troupe-Page", "p1"}};
  auto r = c.get("/api/counter", page);
  if (r.status != 200)
    throw std::runtime_error("GET /api/counter: " + r.describe());
  if (!login.empty()) {
    r = c.post_json("/api/login", {{"user", login}}, page);
    if (r.status != 200)
      throw std::runtime_error("login: " + r.describe());
    r = c.get("/api/counter", page);  // his page, on the connection he now has
    if (r.status != 200)
      throw std::runtime_error("GET /api/counter after login: " + r.describe());
  }
  visitor v;
  v.cid = c.cookie().value_or("");
  return v;
}

// One WebSocket with its page's channel open; `on_frame` gets every frame after that.
struct socket_client : std::enable_shared_from_this<socket_client> {
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer buffer;
  std::string out;
  std::function<void(socket_client&, const std::string&)> on_frame;

  explicit socket_client(net::io_context& io) : ws(io) {}

  // Synchronous: connect, upgrade with his cookie, open his page's channel.
  void open(std::uint16_t port, const visitor& v) {
    beast::get_lowest_layer(ws).connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
      req.set(http::field::cookie, "troupe_cid=" + v.cid);
    }));
    ws.handshake("127.0.0.1", "/_troupe/ws");
    ws.text(true);
    ws.write(net::buffer(json{{"page", v.page}, {"id", 0}, {"path", "/_troupe/openchannel"}, {"data", json::object()}}
                           .dump()));
    ws.read(buffer);
    auto reply = json::parse(beast::buffers_to_string(buffer.data()));
    buffer.consume(buffer.size());
    if (reply.value("status", 0) != 200)
      throw std::runtime_error("openchannel: " + reply.dump());
  }

  void read_loop() {
    ws.async_read(buffer, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        return;
      auto text = beast::buffers_to_string(self->buffer.data());
      self->buffer.consume(self->buffer.size());
      if (self->on_frame)
        self->on_frame(*self, text);
      self->read_loop();
    });
  }

  void send(std::string text) {
    out = std::move(text);
    ws.async_write(net::buffer(out), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        std::cerr << "channel_bench: a write failed: " << ec.message() << "\n";
    });
  }
};

// calls/s of GET /api/counter over 64 channel sockets for `seconds`.
double ws_round_trips(std::uint16_t port, const std::vector<visitor>& users, double seconds, int& failures) {
  net::io_context io;
  std::vector<std::shared_ptr<socket_client>> socks;
  std::uint64_t done = 0;
  const auto until = steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  for (auto& v : users) {
    auto s = std::make_shared<socket_client>(io);
    s->open(port, v);
    s->on_frame = [&, page = v.page, n = std::uint64_t{0}](socket_client& c, const std::string& text) mutable {
      auto reply = json::parse(text, nullptr, false);
      if (!reply.is_object() || reply.value("status", 0) != 200)
        ++failures;
      if (steady::now() >= until)  // each socket ends at its first reply past the deadline
        return c.ws.async_close(websocket::close_code::normal, [](beast::error_code) {});
      ++done;
      c.send(json{{"page", page}, {"id", ++n}, {"method", "GET"}, {"path", "/api/counter"}}.dump());
    };
    socks.push_back(std::move(s));
  }
  const auto t0 = steady::now();
  for (std::size_t i = 0; i < socks.size(); ++i) {
    socks[i]->read_loop();
    socks[i]->send(json{{"page", users[i].page}, {"id", 1}, {"method", "GET"}, {"path", "/api/counter"}}.dump());
  }
  io.run();
  return done / std::chrono::duration<double>(steady::now() - t0).count();
}

// One HTTP keep-alive connection asking GET /api/counter in a loop.
struct http_loop : std::enable_shared_from_this<http_loop> {
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::empty_body> req;
  http::response<http::string_body> res;
  std::function<bool(int status)> next;  // false: stop

  explicit http_loop(net::io_context& io) : stream(io) {}
  void go() {
    res = {};
    http::async_write(stream, req, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec)
        return;
      http::async_read(self->stream, self->buffer, self->res, [self](beast::error_code ec2, std::size_t) {
        if (!ec2 && self->next(self->res.result_int()))
          self->go();
      });
    });
  }
};

double http_round_trips(std::uint16_t port, const std::vector<visitor>& users, double seconds, int& failures) {
  net::io_context io;
  std::uint64_t done = 0;
  const auto until = steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::shared_ptr<http_loop>> loops;
  for (auto& v : users) {
    auto l = std::make_shared<http_loop>(io);
    l->stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    l->req = {http::verb::get, "/api/counter", 11};
    l->req.set(http::field::host, "127.0.0.1");
    l->req.set(http::field::cookie, "troupe_cid=" + v.cid);
    l->req.set("X-Troupe-Page", v.page);
    l->next = [&](int status) {
      if (status != 200)
        ++failures;
      ++done;
      return steady::now() < until;
    };
    loops.push_back(std::move(l));
  }
  const auto t0 = steady::now();
  for (auto& l : loops)
    l->go();
  io.run();
  return done / std::chrono::duration<double>(steady::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  raise_fd_limit();
  int failures = 0;
  json out;
  try {
    node_process node({"--set", "limits.max_connections=" + std::to_string(o.sockets + 1000),
                       "--set", "limits.max_live_users=" + std::to_string(o.sockets + 1000),
                       "--set", "channel.max_sockets=" + std::to_string(o.sockets + 100),
                       "--set", "channel.max_push_users=" + std::to_string(o.sockets),
                       "--set", "group.default.guest_idle_seconds=3600"});
    const auto port = node.port();

    // -- rt ---------------------------------------------------------------------
    std::vector<visitor> rt_users;
    for (int i = 0; i < 64; ++i)
      rt_users.push_back(make_visitor(port, ""));
    std::vector<double> ws_rates, http_rates, ratios;
    for (int r = 0; r < o.rounds; ++r) {
      double w, h;
      if (r % 2 == 0) {
        w = ws_round_trips(port, rt_users, o.seconds, failures);
        h = http_round_trips(port, rt_users, o.seconds, failures);
      } else {
        h = http_round_trips(port, rt_users, o.seconds, failures);
        w = ws_round_trips(port, rt_users, o.seconds, failures);
      }
      ws_rates.push_back(w);
      http_rates.push_back(h);
      ratios.push_back(w / h);
      std::printf("rt round %d: ws %.0f calls/s, http %.0f calls/s, ratio %.3f\n", r + 1, w, h, w / h);
    }

    // -- memory -------------------------------------------------------------------
    std::vector<visitor> fans;
    std::vector<std::string> names;
    for (int i = 0; i < o.sockets; ++i) {
      names.push_back("fan" + std::to_string(i));
      fans.push_back(make_visitor(port, names.back()));
    }
    const long before = rss_kib(node.pid());
    net::io_context io;
    std::vector<std::shared_ptr<socket_client>> socks;
    for (auto& v : fans) {
      auto s = std::make_shared<socket_client>(io);
      s->open(port, v);
      socks.push_back(std::move(s));
    }
    const long after = rss_kib(node.pid());
    const double per_socket = (after - before) * 1024.0 / o.sockets;
    std::printf("memory: RSS %.1f MiB -> %.1f MiB for %d open sockets: %.0f B per socket\n", before / 1024.0,
                after / 1024.0, o.sockets, per_socket);

    // -- fanout -------------------------------------------------------------------
    std::vector<double> fanout_ms;
    int expected = 0, seen = 0;
    steady::time_point t0;
    for (auto& s : socks) {
      s->on_frame = [&](socket_client&, const std::string& text) {
        auto f = json::parse(text, nullptr, false);
        if (f.is_object() && f.contains("push") && ++seen == expected) {
          fanout_ms.push_back(std::chrono::duration<double, std::milli>(steady::now() - t0).count());
          io.stop();
        }
      };
      s->read_loop();
    }
    http_client announcer(port);
    announcer.set_cookie(fans.front().cid);
    for (int r = 0; r < o.rounds; ++r) {
      seen = 0;
      expected = o.sockets;
      t0 = steady::now();
      auto res = announcer.post_json("/api/push_users", {{"users", names}, {"text", "round " + std::to_string(r)}},
                                     {}, std::chrono::milliseconds(60000));
      if (res.status != 200) {
        std::cerr << "channel_bench: announce: " << res.describe() << "\n";
        ++failures;
        break;
      }
      io.restart();
      io.run_for(std::chrono::seconds(60));
      if (seen != expected) {
        std::cerr << "channel_bench: only " << seen << " of " << expected << " pushes arrived\n";
        ++failures;
        break;
      }
      std::printf("fanout round %d: %d pages in %.1f ms (answer: %s)\n", r + 1, expected, fanout_ms.back(),
                  res.body.c_str());
    }

    std::printf("\n| figure | value |\n| --- | --- |\n");
    std::printf("| channel calls/s, 64 sockets (median) | %.0f |\n", median(ws_rates));
    std::printf("| HTTP keep-alive calls/s, 64 connections (median) | %.0f |\n", median(http_rates));
    std::printf("| ratio ws/http (median of rounds) | %.3f |\n", median(ratios));
    std::printf("| memory per open socket (page channel open) | %.0f B |\n", per_socket);
    std::printf("| push fan-out to %d pages (median) | %.1f ms |\n", o.sockets, median(fanout_ms));
    out = {{"ws_calls_per_s", median(ws_rates)}, {"http_calls_per_s", median(http_rates)},
           {"ratio", median(ratios)},         {"bytes_per_socket", per_socket},
           {"fanout_pages", o.sockets},         {"fanout_ms", median(fanout_ms)},
           {"failures", failures}};
  } catch (const std::exception& e) {
    std::cerr << "channel_bench: " << e.what() << "\n";
    return 1;
  }
  std::printf("%s\n", out.dump().c_str());
  return failures ? 1 : 0;
}
