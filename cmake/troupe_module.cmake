# Build-time switches (docs/building.md has the figures behind them):
#   TROUPE_PCH          precompiled headers: each module and test binary names the heavy
#                       third-party headers most of its sources include (PCH ...).
option(TROUPE_PCH "Precompile the heavy third-party headers of each module and test binary" ON)
#   TROUPE_UNITY_BATCH  sources of a module compiled as one translation unit: the CAF and
#                       Beast templates its sources share are instantiated once a batch
#                       (a third less compile time on four actor sources; 0: no unity build).
set(TROUPE_UNITY_BATCH 4 CACHE STRING "Module sources per unity translation unit (0: no unity build)")

# troupe_module(NAME SOURCES ... DEPS ... [PCH header...]): one library target per module, troupe::NAME.
# Headers live next to the sources; everything includes from the repository root
# ("actors/user.hpp"), so a module needs no include/ directory of its own. Only
# include/troupe/ (the app API) is installed: the installed libraries show an
# application that one directory, never the internal module paths.
function(troupe_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;PCH" ${ARGN})
  add_library(troupe_${name} STATIC ${M_SOURCES})
  add_library(troupe::${name} ALIAS troupe_${name})
  target_include_directories(troupe_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # msgpack without its Boost adaptors: <troupe/troupe.hpp> preprocesses to a
  # fifth less (docs/install.md). PUBLIC, so that every translation unit of a
  # program — troupe's and the application's — sees msgpack the same way.
  target_compile_definitions(troupe_${name} PUBLIC MSGPACK_NO_BOOST)
  target_link_libraries(troupe_${name} PUBLIC ${M_DEPS})
  troupe_build_speed(troupe_${name} "${M_PCH}" ${TROUPE_UNITY_BATCH})
  set_property(GLOBAL APPEND PROPERTY TROUPE_MODULES troupe_${name})
endfunction()

# A target's precompiled header (PRIVATE: it never reaches an application) and unity batch.
function(troupe_build_speed target pch batch)
  if(TROUPE_PCH AND pch)
    target_precompile_headers(${target} PRIVATE ${pch})
  endif()
  if(batch GREATER 0)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
  endif()
endfunction()

# troupe_test(MODULE [SERIAL] FILE... DEPS ... [PCH header...]): one GoogleTest binary per module, tests/MODULE.
# SERIAL: ctest runs its tests alone (a test that loads the machine on purpose
# must not slow the timing-sensitive tests beside it). (Only with TROUPE_BUILD_TESTS.)
# The test binaries are built for build time, not speed (docs/building.md): -O0
# -g0 (TROUPE_TEST_OPTIMIZATION; a quarter less compile time than -O1 -g1 for 8 %
# more test run time; instrumented builds keep their -O1 -g1, for readable
# reports), TROUPE_TEST_UNITY_BATCH test files per translation
# unit (a third less compile time: gtest, CAF and Beast parsed and instantiated
# once a batch). So that the file-local helpers of one name (token, bearer, rig,
# t0 …) do not collide in a batch, each tests/<module>/X_test.cpp keeps all it
# defines in `namespace X_test_file`. The product the tests drive keeps the build type's flags.
if(NOT TROUPE_INSTRUMENTED)
  set(troupe_test_flags "-O0;-g0")
else()
  set(troupe_test_flags "")
endif()
set(TROUPE_TEST_OPTIMIZATION "${troupe_test_flags}" CACHE STRING "Optimisation flags of the test binaries")
set(TROUPE_TEST_UNITY_BATCH 4 CACHE STRING "Test sources per unity translation unit (0: no unity build)")
function(troupe_test module)
  cmake_parse_arguments(T "SERIAL" "" "SOURCES;DEPS;LABELS;PCH" ${ARGN})
  set(bin ${module}_tests)
  add_executable(${bin} ${T_SOURCES})
  target_link_libraries(${bin} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  # -Wno-subobject-linkage: in a batch a test file is an included file, where GCC
  # warns of a TEST's base in an anonymous namespace (harmless: one translation unit uses it).
  target_compile_options(${bin} PRIVATE ${TROUPE_TEST_OPTIMIZATION} -Wno-subobject-linkage)
  # A precompiled header pays for itself from the third source on: below that,
  # making it costs what it saves.
  list(LENGTH T_SOURCES sources)
  set(pch "<gtest/gtest.h>;${T_PCH}")
  if(sources LESS 3)
    set(pch "")
  endif()
  troupe_build_speed(${bin} "${pch}" ${TROUPE_TEST_UNITY_BATCH})
  set(serial FALSE)
  if(T_SERIAL)
    set(serial TRUE)
  endif()
  gtest_discover_tests(${bin} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 180 LABELS "${module};${T_LABELS}" RUN_SERIAL ${serial})
endfunction()
