# Test and benchmark helpers. Every test executable is a GoogleTest binary whose test cases
# each become one ctest test carrying the given labels: unit, lint, integration, e2e, browser.

include_guard(GLOBAL)
include(GoogleTest)

# chamber_add_test(NAME <name> SOURCES <src>... [LIBS <lib>...] LABELS <label>...)
function(chamber_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME" "SOURCES;LIBS;LABELS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES OR NOT ARG_LABELS)
    message(FATAL_ERROR "chamber_add_test needs NAME, SOURCES and LABELS")
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest_main
                                            chamber_warnings)
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

# chamber_add_benchmark(NAME <name> SOURCES <src>... [LIBS <lib>...])
# Built with everything else, run by hand: see docs/development.md.
function(chamber_add_benchmark)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME" "SOURCES;LIBS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "chamber_add_benchmark needs NAME and SOURCES")
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} benchmark::benchmark_main
                                            chamber_warnings)
endfunction()

# ctest test "format-check" (label lint): fails when a source file under src/ is not
# formatted as .clang-format says. scripts/format.sh fixes it.
function(chamber_add_format_check)
  add_test(NAME format-check COMMAND "${PROJECT_SOURCE_DIR}/scripts/format.sh" --check)
  set_tests_properties(format-check PROPERTIES LABELS lint)
endfunction()
