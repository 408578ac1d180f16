#pragma once
// The node's entry point is public and installed: include/troupe/node_main.hpp.
#include <troupe/node_main.hpp>
