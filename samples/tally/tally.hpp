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
  static void routes(troupe::route_table<tally_user>& r) {
    r.get("/tally", [](tally_user& u, troupe::request&) { return json({{"user", u.user()}, {"tallies", u.state().tallies}}); });
    r.get("/tally/{name}", [](tally_user& u, troupe::request& q) {
      auto i = u.state().tallies.find(q.param("name"));
      if (i == u.state().tallies.end())
        throw troupe::http_error(404, "no such tally");
      return json({{"name", i->first}, {"value", i->second}});
    });
    r.post("/tally/{name}", [](tally_user& u, troupe::request& q) {
      auto name = q.param("name");
      if (name.size() > 64)
        throw troupe::bad_request("tally names are at most 64 bytes");
      if (u.state().tallies.size() >= 256 && !u.state().tallies.count(name))
        throw troupe::bad_request("at most 256 tallies");
      return json({{"name", name}, {"value", ++u.mutate().tallies[name]}});
    });
  }
};

}  // namespace tally_sample
