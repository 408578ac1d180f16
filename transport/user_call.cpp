#include "transport/user_call.hpp"

#include "actors/errors.hpp"
#include "actors/user.hpp"
#include "config/limits_settings.hpp"
#include "registry/ids.hpp"
#include "transport/deadline_list.hpp"
#include "transport/front.hpp"
#include "transport/inline_unit.hpp"
#include "transport/strand_link.hpp"
#include "transport/worker_pipe.hpp"
#include "transport/worker_pipe_wire.hpp"

#include <boost/asio/post.hpp>
#include <caf/all.hpp>

namespace troupe {

namespace net = boost::asio;

namespace {

class user_call : public std::enable_shared_from_this<user_call>, private deadline_entry {
public:
  user_call(front& f, net::any_io_executor ex, std::shared_ptr<http_request> req,
            user_call_done done, bool minted)
    : front_(f), ex_(std::move(ex)), req_(std::move(req)), deadlines_(&deadline_list::here(own_deadlines_, ex_)),
      done_(std::move(done)), minted_(minted) {}

  void start(std::chrono::milliseconds timeout, std::optional<user_handle> routed) {
    routed_ = std::move(routed);
    arm(timeout);
    if (front_.guards())
      return judge();
    dispatch(false);
  }

  // The io thread's deadline list holds the call by its entry: the call holds
  // itself while its deadline is set, until it is answered or due.
  void arm(std::chrono::milliseconds timeout) {
    timeout_ = timeout;
    self_ = shared_from_this();
    deadlines_->set_after(*this, timeout);
  }

  // The actor deferred the answer (user_actor_base::defer): it answers 504 itself
  // at its deadline; this wait, a little longer, only covers an actor that never does.
  void on_extended(std::uint64_t attempt, std::chrono::milliseconds from_now) {
    if (attempt != attempt_ || finished_)
      return;
    arm(from_now + std::chrono::seconds(1));
  }

  void on_reply(std::uint64_t attempt, http_response&& r) {
    if (attempt != attempt_ || finished_)
      return;
    switch (r.route) {
      case route_note::not_here:
        front_.routes().erase(req_->cid);
        if (!retried_)
          return dispatch(true);
        return finish(error_response(503, "the user cannot be reached right now, retry", 1));
      case route_note::changed: front_.routes().erase(req_->cid); break;
      case route_note::keep: break;
    }
    if (!r.set_cid.empty()) {
      front_.routes().erase(req_->cid);
      // Login and logout end the old id: every other socket of it on this node
      // is closed (4001), so its page opens it again (docs/channels.md); the
      // socket that carried the call goes on under the new id.
      front_.socket_quota().close_connection(req_->cid, req_->channel ? req_->channel.socket : 0);
    }
    finish(std::move(r));
  }

  void on_dropped(std::uint64_t attempt) {
    if (attempt != attempt_ || finished_)
      return;
    front_.routes().erase(req_->cid);
    target_ = nullptr;
    // A local actor that died with the request in its mailbox never ran it. A
    // remote one may have (its node died after the change, before the answer):
    // sending a change again could apply it twice, so its outcome is unknown
    // (no Retry-After); a read is safe to send again (docs/CLUSTER.md).
    if (forwarded_ && req_->method != "GET" && req_->method != "HEAD")
      return finish(error_response(503, "the user's node went away while serving this request: its outcome is unknown"));
    if (!retried_)
      return dispatch(true);  // the target died: re-resolve once
    finish(error_response(503, "the user's actor went away, retry", 1));
  }

  void on_placed(std::uint64_t attempt, placement&& where) {
    if (attempt != attempt_ || finished_)
      return;
    if (!where.actor)  // a placement naming no actor (seen while a cluster settles after a partition): never cached
      return finish(error_response(503, "the user's placement named no actor, retry", 1));
    std::shared_ptr<const route_cache::who> whose;
    if (front_.guards())  // kept for the guards of his next requests
      whose = std::make_shared<route_cache::who>(route_cache::who{where.user, where.type});
    front_.routes().put(req_->cid, where.actor, std::move(whose));
    send_to(where.actor);
  }

  // The commander's whois (null: it does not know the connection).
  void on_whois(std::uint64_t attempt, std::optional<placement> who) {
    if (attempt != attempt_ || finished_)
      return;
    if (!who)
      return dispatch(false);  // his actor judges, once placed
    judged(who->user, who->type);
  }

  void on_resolve_failed(std::uint64_t attempt, const caf::error& err) {
    if (attempt != attempt_ || finished_)
      return;
    if (is(err, errc::bad_request))
      return finish(error_response(400, "bad request"));
    auto hold = static_cast<std::uint32_t>(std::max(1.0, front_.context().limits().hold_seconds));
    if (auto r = refusal_of(err))  // admission, a degraded group, a quarantined user: the refuser computed Retry-After
      return finish(error_response(503, r->text, r->retry_after));
    if (is(err, errc::too_many_users))  // counted (troupe_live_user_refusals_total), not logged: it is overload
      return finish(error_response(503, "the node is at its limit of live users, retry", hold));
    front_.no_placement_log("front: no placement for a call: {}", to_string(err));
    finish(error_response(503, "the user cannot be served right now, retry", hold));
  }

private:
  // Answers on the call's strand, if the call is still waiting, tagged with its attempt.
  using link = strand_link<user_call>;

  class reply final : public reply_slot, link {
  public:
    reply(std::weak_ptr<user_call> c, net::any_io_executor ex, std::uint64_t a, std::shared_ptr<const http_request> req)
      : link(std::move(c), std::move(ex), a), req_(std::move(req)) {}
    const http_request& request() const override { return *req_; }
    void deliver(http_response&& r) override {
      post([r = std::move(r)](user_call& c, std::uint64_t a) mutable { c.on_reply(a, std::move(r)); });
    }
    void extend(std::chrono::milliseconds from_now) override {
      notify([from_now](user_call& c, std::uint64_t a) { c.on_extended(a, from_now); });
    }
    ~reply() override {
      if (!answered())
        post([](user_call& c, std::uint64_t a) { c.on_dropped(a); });
    }

  private:
    std::shared_ptr<const http_request> req_;
  };

  class whois final : public resolve_slot, link {
  public:
    using link::link;
    void placed(placement&& who) override {
      post([w = std::move(who)](user_call& c, std::uint64_t a) mutable { c.on_whois(a, std::move(w)); });
    }
    void failed(const caf::error&) override {
      post([](user_call& c, std::uint64_t a) { c.on_whois(a, std::nullopt); });
    }
    ~whois() override {
      if (!answered())
        post([](user_call& c, std::uint64_t a) { c.on_whois(a, std::nullopt); });
    }
  };

  class resolve final : public resolve_slot, link {
  public:
    using link::link;
    void placed(placement&& where) override {
      post([w = std::move(where)](user_call& c, std::uint64_t a) mutable { c.on_placed(a, std::move(w)); });
    }
    void failed(const caf::error& err) override {
      post([err](user_call& c, std::uint64_t a) { c.on_resolve_failed(a, err); });
    }
    ~resolve() override {
      if (!answered())
        post([](user_call& c, std::uint64_t a) { c.on_resolve_failed(a, make_error(errc::unavailable, "bridge gone")); });
    }
  };

  // Guards (docs/http.md "Guards"), judged before any actor when whose the
  // connection is is known without waking anybody: from the route cache, a
  // fresh guest, or the commander's placement index. Else the actor judges.
  void judge() {
    if (auto who = front_.routes().who_of(req_->cid))
      return judged(who->user, who->type);
    if (minted_)
      return judged(registry::guest_name(req_->cid), front_.default_type());
    if (!front_.may_be_guarded(req_->method, req_->path))
      return dispatch(false);
    auto slot = std::make_shared<whois>(weak_from_this(), ex_, attempt_);
    caf::anon_send(front_.bridge(), whois_atom::value, req_->cid, local_resolve{std::move(slot)});
  }

  void judged(const std::string& user, const std::string& type) {
    if (auto refusal = front_.guard_refusal(*req_, user, type))
      return finish(std::move(*refusal));
    dispatch(false);
  }

  void dispatch(bool retry) {
    retried_ = retry;
    ++attempt_;
    auto actor = std::exchange(routed_, std::nullopt);  // the caller's lookup, for the first attempt
    if (!actor || !*actor || retry)
      actor = front_.routes().find(req_->cid);
    if (actor && *actor)
      return send_to(*actor);
    auto slot = std::make_shared<resolve>(weak_from_this(), ex_, attempt_);
    caf::anon_send(front_.bridge(), resolve_atom::value, req_->cid, minted_, local_resolve{std::move(slot)});
  }

  void send_to(const user_handle& actor) {
    // The slot shares the request: one the actor does not take (not_here, died) is sent once more.
    auto slot = std::make_shared<reply>(weak_from_this(), ex_, attempt_, req_);
    target_ = actor;
    forwarded_ = front_.is_remote(actor);
    if (forwarded_) {
      // A user of a worker process: on its pipe (transport/worker_pipe.hpp), when the request fits one.
      local_reply to_pipe{std::move(slot)};
      if (auto* pipes = worker_pipes_here::current(); pipes && pipes_carry(*req_) && pipes->send(actor, to_pipe))
        return;
      // A slot cannot cross nodes: the forwarder asks for it (and fails it fast).
      return caf::anon_send(front_.forwarder(), http_atom::value, actor, std::move(to_pipe));
    }
    send_here(actor, http_atom::value, local_reply{std::move(slot)});  // idle, he runs here (transport/inline_unit.hpp)
  }

  void finish(http_response&& r) {
    if (finished_)
      return;
    finished_ = true;
    deadline_list::clear(*this);
    auto self = std::move(self_);
    auto done = std::move(done_);
    done(std::move(r), target_);
  }

  void expired() override {
    auto self = std::move(self_);
    if (finished_)
      return;
    front_.timeout_log("front: {} {} not answered within {} ms (504)", req_->method, req_->path, timeout_.count());
    target_ = nullptr;
    finish(error_response(504, "the request was not answered in time"));
  }

  void abandoned() override { self_.reset(); }  // the io thread ends

  front& front_;
  net::any_io_executor ex_;
  std::shared_ptr<http_request> req_;
  std::unique_ptr<deadline_list> own_deadlines_;  // off the front's io threads only (none today)
  deadline_list* deadlines_;
  std::shared_ptr<user_call> self_;  // while the deadline is set
  std::chrono::milliseconds timeout_{0};
  user_call_done done_;
  user_handle target_;  // the actor that has the request now
  bool minted_;
  std::optional<user_handle> routed_;
  std::uint64_t attempt_ = 0;
  bool retried_ = false;
  bool forwarded_ = false;
  bool finished_ = false;
};

}  // namespace

void call_user(front& owner, net::any_io_executor ex, std::shared_ptr<http_request> req,
               std::chrono::milliseconds timeout, user_call_done done, bool minted, std::optional<user_handle> routed) {
  auto call = std::make_shared<user_call>(owner, std::move(ex), std::move(req), std::move(done), minted);
  call->start(timeout, std::move(routed));
}

}  // namespace troupe
