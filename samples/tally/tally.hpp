#pragma once
// The `tally` sample: named tallies per user, addressed by a path parameter.
// A second proof that an actor type needs nothing but <troupe/troupe.hpp>.

#include <troupe/troupe.hpp>

#include <map>
#include <string>

namespace tally_sample {

struct tally_state {
  std::map<std::string, std::int64_t> tallies;
  MSGPACK_DEFINE(tallies);
};

class tally_user : public troupe::user_actor<tally_state> {
public:
  void routes(troupe::router& r) override {
    r.get("/tally", [this](troupe::request&) { return json({{"user", user()}, {"tallies", state().tallies}}); });
    r.get("/tally/{name}", [this](troupe::request& q) {
      auto i = state().tallies.find(q.param("name"));
      if (i == state().tallies.end())
        throw troupe::http_error(404, "no such tally");
      return json({{"name", i->first}, {"value", i->second}});
    });
    r.post("/tally/{name}", [this](troupe::request& q) {
      auto name = q.param("name");
      if (name.size() > 64)
        throw troupe::bad_request("tally names are at most 64 bytes");
      if (state().tallies.size() >= 256 && !state().tallies.count(name))
        throw troupe::bad_request("at most 256 tallies");
      return json({{"name", name}, {"value", ++mutate().tallies[name]}});
    });
  }
};

}  // namespace tally_sample
