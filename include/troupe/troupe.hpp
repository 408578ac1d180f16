#pragma once
/// \file
/// troupe: the one header an application includes. See README "Write your own
/// actor type" and examples/cart/ (built against the installed package:
/// `find_package(troupe 0.2 REQUIRED)`, `target_link_libraries(app PRIVATE troupe::troupe)`).
///
/// Everything under include/troupe/ is installed; nothing here includes the
/// platform's internal modules (no CAF, Asio or Beast types).

#include <troupe/app.hpp>        // user_actor<State>, route_table, app_types (and <troupe/http.hpp>: request, response, promise, upload)
#include <troupe/node_main.hpp>  // node_main: the app's main()
#include <troupe/version.hpp>    // TROUPE_VERSION
