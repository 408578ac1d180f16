// A serving node for forwarder_test's kill -9 case: an actor system with CAF's
// middleman that publishes, on 127.0.0.1, an actor answering
// (http_atom, http_request) -> http_response as a user actor's remote interface
// does ("/hold" is never answered; anything else is echoed). Prints
// "port N" on stdout once published, then serves until it is killed.
#include "actors/messages.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <iostream>
#include <thread>

using namespace troupe;

int main() {
  caf::actor_system_config cfg;
  register_types(cfg);
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto actor = sys.spawn([](caf::event_based_actor* self) -> caf::behavior {
    auto held = std::make_shared<std::vector<caf::response_promise>>();
    return {[=](http_atom, http_request& req) -> caf::result<http_response> {
      if (req.path == "/hold") {
        held->push_back(self->make_response_promise());
        return caf::delegated<http_response>();
      }
      http_response r;
      r.body = req.path;
      return r;
    }};
  });
  auto port = sys.middleman().publish(actor, 0, "127.0.0.1", true);
  if (!port) {
    std::cerr << "publish: " << sys.render(port.error()) << std::endl;
    return 1;
  }
  std::cout << "port " << *port << std::endl;
  while (true)
    std::this_thread::sleep_for(std::chrono::hours(1));  // serves until the test kills it: orders nothing
}
