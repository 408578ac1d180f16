#pragma once
/// \file
/// Forward declarations of message structs, for typed interfaces that name a
/// message defined in a header they cannot include (it would close a cycle).
/// Whoever sends or receives one includes its own header.

namespace troupe {

struct login_request;  ///< actors/commander.hpp
struct placement;      ///< actors/user.hpp

}  // namespace troupe
