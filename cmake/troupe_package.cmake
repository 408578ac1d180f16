# What `cmake --install` and `cpack -G DEB` deliver (docs/install.md):
#   include/troupe/*.hpp               the app API (what an actor type includes), nothing else
#   lib/libtroupe_*.a                  the platform's static libraries
#   lib/cmake/troupe/                  troupeConfig.cmake (+ version file, targets, FindCAF.cmake):
#                                      find_package(troupe 0.2 REQUIRED) → troupe::troupe
#   lib/pkgconfig/troupe.pc            the same for pkg-config
#   bin/troupe                         the node binary (the samples)
#   lib/systemd/system/troupe.service  dist/troupe.service
# Two components: `node` (the binary and its unit) and `dev` (everything an
# application builds with); the Debian packages troupe and troupe-dev.

configure_file(${PROJECT_SOURCE_DIR}/cmake/version.hpp.in ${PROJECT_BINARY_DIR}/include/troupe/version.hpp @ONLY)

# troupe::troupe: the app API's headers and every library of the platform
# (node_main is in troupe::transport, which links the rest).
add_library(troupe_troupe INTERFACE)
add_library(troupe::troupe ALIAS troupe_troupe)
set_target_properties(troupe_troupe PROPERTIES EXPORT_NAME troupe)
target_include_directories(troupe_troupe INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(troupe_troupe INTERFACE troupe::transport)
target_compile_features(troupe_troupe INTERFACE cxx_std_17)

# Exported as troupe::<module>, the names the tree uses.
get_property(troupe_modules GLOBAL PROPERTY TROUPE_MODULES)
foreach(m IN LISTS troupe_modules)
  string(REGEX REPLACE "^troupe_" "" short ${m})
  set_target_properties(${m} PROPERTIES EXPORT_NAME ${short})
endforeach()
set_target_properties(troupe_asio PROPERTIES EXPORT_NAME asio)

set(TROUPE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/troupe)
install(TARGETS ${troupe_modules} troupe_asio troupe_troupe EXPORT troupeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# `cmake --install --strip` (and cpack, CPACK_STRIP_FILES) strips the binary; CMake
# leaves static libraries alone, so their debug info goes here: -g1 makes them
# five times larger (270 MB, 54 MB without).
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    file(GLOB _troupe_archives \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/libtroupe_*.a\")
    foreach(_archive IN LISTS _troupe_archives)
      execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug \"\${_archive}\" RESULT_VARIABLE _rc)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR \"strip --strip-debug \${_archive} failed\")
      endif()
    endforeach()
  endif()" COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/troupe ${PROJECT_BINARY_DIR}/include/troupe
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.hpp")
install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION ${TROUPE_CMAKE_DIR} COMPONENT dev)

include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/troupeConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/troupeConfig.cmake INSTALL_DESTINATION ${TROUPE_CMAKE_DIR})
# 0.x: a minor version may break the API, so 0.2 accepts 0.2.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/troupeConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/troupeConfig.cmake ${PROJECT_BINARY_DIR}/troupeConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake
        DESTINATION ${TROUPE_CMAKE_DIR} COMPONENT dev)

# pkg-config: relocatable (the prefix is found from the .pc file's own place), so
# `cmake --install --prefix DIR` works as well as the package's /usr.
string(REGEX REPLACE "[^/]+" ".." TROUPE_PC_TO_PREFIX "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(TROUPE_PC_LIBS "")
foreach(m transport cluster actors gate store registry config asio)  # dependants before what they use
  string(APPEND TROUPE_PC_LIBS " -ltroupe_${m}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/troupe.pc.in ${PROJECT_BINARY_DIR}/troupe.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/troupe.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# The systemd unit (dist/troupe.service: its hardening set is in docs/install.md).
install(FILES ${PROJECT_SOURCE_DIR}/dist/troupe.service DESTINATION lib/systemd/system COMPONENT node)
install(FILES ${PROJECT_SOURCE_DIR}/docs/install.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT node)

# cpack -G DEB (from build/): troupe_<version>_<arch>.deb and troupe-dev_….deb.
if(NOT TROUPE_TOP_LEVEL)
  return()  # an application's own CPack settings are its business
endif()
set(CPACK_PACKAGE_NAME troupe)
set(CPACK_PACKAGE_VENDOR "troupe")
set(CPACK_PACKAGE_CONTACT "troupe maintainers <troupe@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "actor-model service platform (CAF, Boost.Beast)")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://localhost/troupe")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the binary without its debug info (-g1 triples its size)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL node dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_NODE_PACKAGE_NAME troupe)
set(CPACK_DEBIAN_NODE_PACKAGE_SHLIBDEPS ON)  # Depends from the binary's shared libraries
set(CPACK_DEBIAN_DEV_PACKAGE_NAME troupe-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# What find_package(troupe) finds in turn (troupeConfig.cmake's find_dependency).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "g++, cmake, pkg-config, libcaf-dev (>= 0.17), libboost-dev, libssl-dev, libmsgpack-cxx-dev (>= 4), libspdlog-dev, libtoml11-dev, nlohmann-json3-dev, libcli11-dev, libpq-dev")
set(CPACK_COMPONENT_NODE_DESCRIPTION "troupe node binary (with the notes and tally samples) and its systemd unit")
set(CPACK_COMPONENT_DEV_DESCRIPTION "troupe headers, static libraries, CMake package and pkg-config file for applications")
include(CPack)
