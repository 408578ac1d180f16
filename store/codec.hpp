#pragma once
// The state codec is part of the public API (user states are msgpack):
// include/troupe/codec.hpp, installed. Internal code keeps this path.
#include <troupe/codec.hpp>
