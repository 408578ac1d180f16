# Instrumented builds, each in its own build directory (see docs/RELIABILITY.md):
#
#   TROUPE_SANITIZE=address  ASan + UBSan over the whole project (build-asan/)
#   TROUPE_SANITIZE=thread   TSan over the whole project (build-tsan/)
#   TROUPE_FUZZ=ON           clang only: libFuzzer targets in fuzz/ (build-fuzz/);
#                            build them with `--target fuzz_all`, which compiles only
#                            the libraries the targets link.
#
# The flags go to every target of the build (compile and link), so the product
# libraries a test or a fuzz target links are instrumented like the test itself.
# System libraries (libspdlog, libfmt, OpenSSL, …) are not instrumented; the
# thread build links a libcaf of its own built with -fsanitize=thread
# (scripts/sanitize.sh passes its paths as CAF_INCLUDE_DIR/CAF_*_LIBRARY).

set(TROUPE_SANITIZE "" CACHE STRING "Sanitizers for the whole build: address (ASan+UBSan), thread (TSan), or empty")
set_property(CACHE TROUPE_SANITIZE PROPERTY STRINGS "" address thread)
option(TROUPE_FUZZ "Build the libFuzzer targets of fuzz/ (requires clang++)" OFF)

if(TROUPE_SANITIZE STREQUAL "address")
  # -fno-sanitize=null: CAF 0.17's own header binds a reference to a null
  # shared_ptr<std::tuple<>> in every spawn of a function actor without
  # arguments (caf/detail/init_fun_factory.hpp:85-105, never read), which the
  # null check reports in troupe's objects; gcc has no per-file ignore list and
  # UBSan's run-time suppressions do not match it by file or function. A real
  # null dereference is still an ASan SEGV report. (docs/RELIABILITY.md)
  set(troupe_compile_flags -fsanitize=address,undefined -fno-sanitize=null -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  set(troupe_link_flags -fsanitize=address,undefined)
elseif(TROUPE_SANITIZE STREQUAL "thread")
  set(troupe_compile_flags -fsanitize=thread -fno-omit-frame-pointer)
  set(troupe_link_flags -fsanitize=thread)
elseif(NOT TROUPE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "TROUPE_SANITIZE must be address, thread or empty, not '${TROUPE_SANITIZE}'")
endif()

if(TROUPE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TROUPE_FUZZ=ON needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT TROUPE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "TROUPE_FUZZ=ON already uses ASan+UBSan; leave TROUPE_SANITIZE empty")
  endif()
  # Coverage instrumentation for libFuzzer everywhere; the libFuzzer driver
  # itself (-fsanitize=fuzzer, which brings main()) is linked into the fuzz targets only.
  set(troupe_compile_flags -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
      -fno-sanitize-recover=undefined)
  set(troupe_link_flags -fsanitize=address,undefined)
endif()

if(NOT TROUPE_SANITIZE STREQUAL "")
  # -O1: what the sanitizers' authors recommend (readable reports), and far
  # cheaper to compile than -O2 on a shared 2-core machine.
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
endif()

# TROUPE_INSTRUMENTED: a sanitizer or fuzz build, where the tests and their
# support keep the build type's -O1 -g1 and the installed-package tests do not run.
if(NOT TROUPE_SANITIZE STREQUAL "" OR TROUPE_FUZZ)
  set(TROUPE_INSTRUMENTED ON)
else()
  set(TROUPE_INSTRUMENTED OFF)
endif()

if(troupe_compile_flags)
  add_compile_options(${troupe_compile_flags})
  add_link_options(${troupe_link_flags})
endif()
