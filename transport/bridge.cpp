#include "transport/bridge.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include <chrono>

namespace troupe {

namespace {

using nlohmann::json;

http_response json_response(std::uint16_t status, const json& body) {
  http_response r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The text an error carries (its context), or its rendering.
std::string error_text(caf::local_actor* self, const caf::error& err) {
  if (err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return self->system().render(err);
}

// A census answer: the JSON, or 400/404/503 from its error.
template <class Self>
auto census_reply(Self* self, local_admin slot) {
  return std::make_pair(
    [slot](std::string& body) {
      http_response r;
      r.body = std::move(body);
      slot->done(std::move(r));
    },
    [self, slot](caf::error& err) {
      if (is(err, errc::bad_request))
        return slot->done(error_response(400, error_text(self, err)));
      if (is(err, errc::no_such_user))
        return slot->done(error_response(404, error_text(self, err)));
      slot->done(error_response(503, "the census did not answer: " + error_text(self, err), 1));
    });
}

// Carries out one order and logs it with its outcome.
struct order_run {
  bridge_handle::pointer self;
  census_handle census;
  operator_order order;
  local_admin slot;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  double ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  std::string on() const { return (order.what == "drain" ? "worker:" : "user:") + order.target; }

  void log(const std::string& outcome, json numbers, const std::string& detail) const {
    numbers["ms"] = std::round(ms() * 10) / 10;
    self->send(census, log_atom::value,
               orchestration_entry{order.who, order.from, order.what, on(), outcome, numbers.dump(), detail});
  }

  void ok(json body, json numbers) const {
    log("ok", std::move(numbers), "");
    slot->done(json_response(200, body));
  }

  // Unknown target (404), refused (409), or failed (503).
  void error(const caf::error& err, json numbers = json::object()) const {
    auto text = error_text(self, err);
    if (is(err, errc::no_such_user)) {
      log("refused", std::move(numbers), text);
      return slot->done(error_response(404, "no such " + std::string(order.what == "drain" ? "worker" : "user")
                                              + " on this node"));
    }
    if (is(err, errc::refused) || is(err, errc::busy)) {
      log("refused", std::move(numbers), text);
      return slot->done(error_response(409, text));
    }
    log("failed", std::move(numbers), text);
    slot->done(error_response(503, "the " + order.what + " did not complete: " + text, 1));
  }
};

bridge_handle::behavior_type bridge_impl(bridge_handle::pointer self, commander_handle commander,
                                         global_store_handle global_store, census_handle census,
                                         orchestrator_handle orchestrator, caf::duration hold_timeout,
                                         caf::duration request_timeout) {
  return {
    [=](resolve_atom, std::string& cid, bool minted, local_resolve& slot) {
      self->request(commander, hold_timeout, resolve_atom::value, std::move(cid), minted)
        .then([slot](placement& where) { slot->placed(std::move(where)); },
              [slot](caf::error& err) { slot->failed(err); });
    },
    [=](whois_atom, std::string& cid, local_resolve& slot) {
      self->request(commander, hold_timeout, whois_atom::value, std::move(cid))
        .then([slot](placement& who) { slot->placed(std::move(who)); },
              [slot](caf::error& err) { slot->failed(err); });
    },
    [=](order_atom, operator_order& order, local_admin& slot) {
      auto run = std::make_shared<order_run>(order_run{self, census, std::move(order), std::move(slot)});
      auto& o = run->order;
      auto on_error = [run](caf::error& err) { run->error(err); };
      if (o.what == "freeze") {
        self->request(commander, request_timeout, freeze_atom::value, o.target)
          .then([run](bool) { run->ok({{"frozen", run->order.target}}, {{"users", 1}}); }, on_error);
      } else if (o.what == "drop") {
        self->request(commander, request_timeout, drop_atom::value, o.target)
          .then(
            [run](std::string& was, std::uint64_t connections) {
              run->ok({{"dropped", run->order.target}, {"was", was}, {"connections", connections}},
                      {{"connections", connections}, {"was", was}});
            },
            on_error);
      } else if (o.what == "drain") {
        self->request(commander, request_timeout, drain_atom::value, o.target)
          .then(
            [run](std::uint64_t frozen, std::uint64_t failed) {
              json numbers{{"frozen", frozen}, {"failed", failed}};
              if (failed == 0)
                return run->ok({{"drained", run->order.target}, {"frozen", frozen}, {"failed", 0}}, numbers);
              run->log("failed", numbers, "some users could not be frozen; the worker stays in service");
              auto r = json_response(503, {{"error", "some users could not be frozen; the worker stays in service"},
                                           {"frozen", frozen},
                                           {"failed", failed}});
              r.retry_after = 1;
              run->slot->done(std::move(r));
            },
            on_error);
      } else {
        run->slot->done(error_response(400, "unknown order " + o.what));
      }
    },
    [=](global_atom, local_admin& slot) {
      self->request(global_store, request_timeout, global_atom::value)
        .then(
          [slot](std::string& json) {
            http_response r;
            r.body = std::move(json);
            slot->done(std::move(r));
          },
          [slot](caf::error&) { slot->done(error_response(503, "the global store did not answer", 1)); });
    },
    [=](census_atom, census_query& q, local_admin& slot) {
      auto [ok, fail] = census_reply(self, slot);
      self->request(census, request_timeout, census_atom::value, std::move(q)).then(ok, fail);
    },
    [=](census_atom, std::string& id, local_admin& slot) {
      auto [ok, fail] = census_reply(self, slot);
      self->request(census, request_timeout, census_atom::value, std::move(id)).then(ok, fail);
    },
    [=](log_atom, std::uint32_t tail, local_admin& slot) {
      auto [ok, fail] = census_reply(self, slot);
      self->request(census, request_timeout, log_atom::value, tail).then(ok, fail);
    },
    [=](orchestrate_atom a, orchestration_request& q, local_admin& slot) {
      self->request(orchestrator, request_timeout, a, std::move(q))
        .then(
          [slot](orchestration_answer& ans) {
            http_response r;
            r.status = ans.status;
            r.body = std::move(ans.body);
            slot->done(std::move(r));
          },
          [slot](caf::error&) { slot->done(error_response(503, "the orchestrator did not answer", 1)); });
    },
  };
}

}  // namespace

bridge_handle spawn_bridge(caf::actor_system& sys, commander_handle commander, global_store_handle global_store,
                           census_handle census, orchestrator_handle orchestrator, caf::duration hold_timeout,
                           caf::duration request_timeout) {
  return sys.spawn(bridge_impl, std::move(commander), std::move(global_store), std::move(census),
                   std::move(orchestrator), hold_timeout, request_timeout);
}

}  // namespace troupe
