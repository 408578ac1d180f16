#pragma once
/// \file
/// Internal to the app API (<troupe/app.hpp>): what the platform gives a user actor (user_host) and the orders and
/// deferred answers the actor hands back. Included by <troupe/app.hpp> where the public
/// types these name are complete: include <troupe/app.hpp>, never this header alone.
/// Nothing here is promised to an application; it may change in any release.

#include <troupe/detail/wire.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace caf {
class local_actor;
}

namespace troupe {
namespace detail {
/// One push, as a user actor hands it to the platform.
struct push_order {
  enum class scope : std::uint8_t { page, own_pages, users } to = scope::page;
  std::string page;                ///< scope::page: the page id
  std::vector<std::string> users;  ///< scope::users: whose pages
  std::string path;
  nlohmann::json data;
  std::function<void(const push_outcome&)> done;  ///< runs in the sending actor; may be empty
};

/// One tell(), as a user actor hands it to the platform.
struct tell_order {
  encoded_message message;
  std::function<void(const tell_outcome&)> done;  ///< runs in the sending actor; may be empty
};

/// A deferred answer, completed by the user actor's host.
struct continuation {
  enum class kind { after, login, logout, global, stream, push, tell, defer, upload } what;
  std::chrono::milliseconds delay{0};                      // after; defer: the timeout
  std::function<response()> then;                          // after
  std::function<void(promise)> on_deferred;                // defer
  upload_handlers uploads;                                 // upload
  std::string user;                                        // login
  global_op op;                                            // global
  std::function<response(const global_reply&)> on_reply;  // global
  bool ndjson = false;                                     // stream: NDJSON, else SSE
  stream_handlers handlers;                                // stream
  std::shared_ptr<push_order> push;                        // push
  std::function<response(const push_outcome&)> on_pushed;  // push
  encoded_message message;                                  // tell
  std::function<response(const tell_outcome&)> on_told;    // tell
};

/// What the platform gives a user actor: its identities and its actor.
class user_host {
public:
  virtual ~user_host() = default;
  virtual const std::string& user() const = 0;
  virtual const std::string& connection() const = 0;
  virtual const std::string& page() const = 0;
  virtual const std::string& node() const = 0;
  virtual const std::string& worker() const = 0;
  virtual void changed() = 0;
  virtual caf::local_actor* actor() = 0;
  virtual void push(push_order order) = 0;
  // Streams (docs/streaming.md); the defaults: a host without streams (tests).
  /// Writes `data` framed for stream `id` (as_json: NDJSON line / SSE data of a JSON value).
  virtual stream_write stream_send(std::uint64_t, std::string_view, std::string_view, std::string_view, bool) {
    return stream_write::closed;
  }
  /// SSE: a `retry:` field of `ms` for stream `id` (NDJSON: nothing is written).
  virtual stream_write stream_retry(std::uint64_t, std::uint64_t) { return stream_write::closed; }
  virtual void stream_close(std::uint64_t) {}
  /// {open, slow, credit} of stream `id`.
  struct stream_status {
    bool open = false;
    bool slow = false;
    std::uint64_t credit = 0;
  };
  virtual stream_status stream_state(std::uint64_t) const { return {}; }
  // Deferred answers (user_actor_base::defer); the defaults: a host without them (tests).
  /// Answers deferred request `id`; false when it is no longer open.
  virtual bool promise_resolve(std::uint64_t, response&&) { return false; }
  /// Moves the deadline of deferred request `id`; false when it is no longer open.
  virtual bool promise_keep_alive(std::uint64_t, std::chrono::milliseconds) { return false; }
  virtual bool promise_open(std::uint64_t) const { return false; }
  /// Runs `fn` in this actor after `delay`; false when too many are pending.
  virtual bool later(std::chrono::milliseconds, std::function<void()>) { return false; }
  // App WebSockets (app_socket); the defaults: a host without sockets (tests).
  /// Queues `data` as a frame of `kind` (0 text, 1 binary, 2 close with
  /// `code`) on this user's socket `id`; false when it is not open here.
  virtual bool socket_send(const std::string&, std::string, std::uint8_t, std::uint16_t) { return false; }
  /// True while this user's socket `id` is open here.
  virtual bool socket_open(const std::string&) const { return false; }
  /// This user's open app sockets.
  virtual std::vector<app_socket> socket_list() { return {}; }
  /// The sender of the message being handled ("" otherwise).
  virtual const std::string& message_sender() const {
    static const std::string none;
    return none;
  }
  /// Sends a message to another user (README "Messages between users").
  virtual void tell(tell_order order) {
    if (order.done)
      order.done(tell_outcome{tell_outcome::result::unavailable, "messages are not available here"});
  }
};
}  // namespace detail
}  // namespace troupe
