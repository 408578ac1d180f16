# troupe_module(NAME SOURCES ... DEPS ...): one library target per module, troupe::NAME.
# Headers live next to the sources; everything includes from the repository root
# ("actors/user.hpp"), so a module needs no include/ directory of its own.
function(troupe_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(troupe_${name} STATIC ${M_SOURCES})
  add_library(troupe::${name} ALIAS troupe_${name})
  target_include_directories(troupe_${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(troupe_${name} PUBLIC ${M_DEPS})
endfunction()

# troupe_test(MODULE FILE... DEPS ...): one GoogleTest binary per module, tests/MODULE.
function(troupe_test module)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  set(bin ${module}_tests)
  add_executable(${bin} ${T_SOURCES})
  target_link_libraries(${bin} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${bin} DISCOVERY_TIMEOUT 60
                       PROPERTIES TIMEOUT 180 LABELS "${module};${T_LABELS}")
endfunction()
