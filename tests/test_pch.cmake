# A precompiled header for the test programs: the system, GoogleTest and
# Abseil headers nearly every test source parses (common/test_pch.h) are
# parsed once, by pvdisk_test_pch, and every target below that links
# GoogleTest (the gtest programs and their harness libraries) reuses that
# one header (REUSE_FROM) instead of parsing them again in each source:
# nearly 30 % of the test sources' compiler time from a cold cache (see
# docs/perf/suite-time-3-2026-12-06.md); the rest is their own code.
#
# Reusing is valid because these targets compile with the same options
# (the warnings, -O1 above, GoogleTest's GTEST_HAS_PTHREAD); their other
# definitions (PVDISK_BINARY, FUSE_USE_VERSION, ...) name nothing in the
# header. GCC refuses a header built with other options, and CMake adds
# -Winvalid-pch, which -Werror makes an error: a mismatch breaks the build
# instead of silently parsing everything again.
#
# ccache caches nothing compiled with a precompiled header unless its
# sloppiness includes pch_defines and time_macros: through such a ccache,
# every test source would compile again on each rebuild. So where the
# compiler is ccache (a masquerading symlink or CMAKE_CXX_COMPILER_LAUNCHER)
# and its sloppiness lacks those two (ccache.conf or CCACHE_SLOPPINESS, as
# the configure sees them: each configure decides again), the header is not
# used, and the configure says so. A build without ccache (CI) uses it.
option(PVDISK_TEST_PCH "Precompile the headers the test sources share" ON)

set(pvdisk_test_pch_off_reason "")
get_filename_component(compiler_itself ${CMAKE_CXX_COMPILER} REALPATH)
get_filename_component(compiler_name ${compiler_itself} NAME)
set(ccache_program "")
if(compiler_name STREQUAL "ccache")
  set(ccache_program ${compiler_itself})
elseif(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache")
  list(GET CMAKE_CXX_COMPILER_LAUNCHER 0 ccache_program)
endif()
if(ccache_program)
  execute_process(COMMAND ${ccache_program} --get-config sloppiness
    OUTPUT_VARIABLE ccache_sloppiness OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE ccache_status ERROR_QUIET)
  if(NOT ccache_status EQUAL 0 OR NOT ccache_sloppiness MATCHES "pch_defines"
     OR NOT ccache_sloppiness MATCHES "time_macros")
    set(pvdisk_test_pch_off_reason
        "ccache's sloppiness (\"${ccache_sloppiness}\") lacks pch_defines,time_macros: ccache would cache no test source compiled with it")
  endif()
endif()

if(PVDISK_TEST_PCH AND pvdisk_test_pch_off_reason)
  message(STATUS "Test precompiled header: off, ${pvdisk_test_pch_off_reason} (set sloppiness = pch_defines,time_macros in ccache.conf to use it)")
elseif(PVDISK_TEST_PCH)
  add_library(pvdisk_test_pch OBJECT common/test_pch.cc)
  target_link_libraries(pvdisk_test_pch PRIVATE GTest::gtest absl::status
                        absl::statusor absl::strings absl::str_format)
  target_precompile_headers(pvdisk_test_pch PRIVATE common/test_pch.h)
  foreach(dir ${PVDISK_TEST_DIRS})
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/CMakeLists.txt)
      continue()
    endif()
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target ${targets})
      get_target_property(type ${target} TYPE)
      get_target_property(links ${target} LINK_LIBRARIES)
      if(type MATCHES "EXECUTABLE|STATIC_LIBRARY"
         AND links MATCHES "GTest::|pvdisk_fuse_harness|pvdisk_rbd_harness")
        target_precompile_headers(${target} REUSE_FROM pvdisk_test_pch)
      endif()
    endforeach()
  endforeach()
endif()
