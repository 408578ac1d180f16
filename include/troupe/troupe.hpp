#pragma once
/// \file
/// troupe: the one header an application includes. See README "Write your own actor type".

#include "actors/app.hpp"          // user_actor<State>, router, request, response, app_types
#include "transport/node_main.hpp"  // node_main
