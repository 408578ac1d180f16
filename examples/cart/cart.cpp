// cart: a shopping cart per user, a complete troupe application.
//   GET /cart                  {"user","items":{item: count}}
//   POST /cart/{item} {"count"}  adds count (default 1) of item
//   DELETE /cart               empties the cart
//   POST /login {"user"}       the cart becomes that user's (see README "Try it")
#include <troupe/troupe.hpp>

#include <map>
#include <string>

struct cart_state {  // the user's store: what is frozen to the deposit and woken
  std::map<std::string, std::int64_t> items;
  MSGPACK_DEFINE(items);
};

class cart_user : public troupe::user_actor<cart_state> {
public:
  static constexpr std::size_t max_items = 100;  // distinct items per cart
  static constexpr std::int64_t max_count = 1000;  // per item and request

  static void routes(troupe::route_table<cart_user>& r) {
    r.get("/cart", [](cart_user& u, troupe::request&) { return u.listed(); });
    r.post("/cart/{item}", [](cart_user& u, troupe::request& q) {
      std::int64_t count = 1;
      if (!q.body().empty() && q.json().contains("count")) {
        auto& c = q.json()["count"];
        if (!c.is_number_integer() || c < 1 || c > max_count)
          throw troupe::bad_request("count: an integer from 1 to " + std::to_string(max_count));
        count = c.get<std::int64_t>();
      }
      auto item = q.param("item");
      if (item.size() > 64)
        throw troupe::bad_request("item names are at most 64 bytes");
      if (u.state().items.size() >= max_items && !u.state().items.count(item))
        throw troupe::bad_request("the cart is full");  // 400; the actor lives on
      u.mutate().items[item] += count;  // mutate(): the store changed
      return u.listed();
    });
    r.del("/cart", [](cart_user& u, troupe::request&) {
      u.mutate().items.clear();
      return u.listed();
    });
    r.post("/login", [](cart_user& u, troupe::request& q) { return u.login(q.json_string("user")); });
  }

private:
  troupe::response listed() const { return json({{"user", user()}, {"items", state().items}}); }
};

int main(int argc, char** argv) {
  return troupe::node_main(argc, argv, troupe::user_types<cart_user>("cart"));
}
