#pragma once
// The app API is public and installed: include/troupe/app.hpp. Internal code
// keeps including it by this path.
#include <troupe/app.hpp>
