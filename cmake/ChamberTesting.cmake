# Test and benchmark helpers. Every test executable is a GoogleTest binary whose test cases
# each become one ctest test carrying the given labels: unit, lint, integration, e2e, browser.

include_guard(GLOBAL)
include(GoogleTest)

# chamber_add_test(NAME <name> SOURCES <src>... [LIBS <lib>...] LABELS <label>...
#                  [TIMEOUT <seconds>] [CONTROLPLANE controlplane|controlplane-1.35])
# TIMEOUT: each test case's limit, where the preset's (300 s) is too short.
# CONTROLPLANE: for integration and e2e tests, which control plane they run against (the pinned
# release's, by default).
function(chamber_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;TIMEOUT;CONTROLPLANE" "SOURCES;LIBS;LABELS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES OR NOT ARG_LABELS)
    message(FATAL_ERROR "chamber_add_test needs NAME, SOURCES and LABELS")
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest_main
                                            chamber_warnings)
  set(timeout)
  if(ARG_TIMEOUT)
    set(timeout TIMEOUT ${ARG_TIMEOUT})
  endif()
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${ARG_LABELS}" ${timeout})
  if(NOT ARG_CONTROLPLANE)
    set(ARG_CONTROLPLANE controlplane)
  endif()
  if("integration" IN_LIST ARG_LABELS OR "e2e" IN_LIST ARG_LABELS)
    _chamber_require_controlplane(${ARG_NAME} ${ARG_CONTROLPLANE})
  endif()
endfunction()

# The test control plane (scripts/controlplane.sh): etcd, kube-apiserver and
# kube-controller-manager on loopback, started once before the first test that needs it and
# stopped after the last. Tests read CHAMBER_TEST_KUBECONFIG (an admin kubeconfig) and
# CHAMBER_TEST_CONTROLPLANE_DIR (also holding `env`, `pki/` and `logs/`). A second one,
# "controlplane-1.35", runs the kube-apiserver of Kubernetes 1.35 (etcd and kube-apiserver only)
# for what only that release serves.
set(CHAMBER_CONTROLPLANE_DIR "${CMAKE_BINARY_DIR}/controlplane")
set(CHAMBER_CONTROLPLANE_ENV
    "CHAMBER_TEST_KUBECONFIG=${CHAMBER_CONTROLPLANE_DIR}/kubeconfig"
    "CHAMBER_TEST_CONTROLPLANE_DIR=${CHAMBER_CONTROLPLANE_DIR}")

# Fixtures "controlplane" and "controlplane-1.35": the setup test starts the control plane from
# binaries that `scripts/controlplane.sh build --all --k8s-1.35` made (it builds nothing itself),
# the cleanup test stops it.
function(chamber_add_controlplane_fixture)
  set(script "${PROJECT_SOURCE_DIR}/scripts/controlplane.sh")
  foreach(fixture controlplane controlplane-1.35)
    set(option --controller-manager)
    if(fixture STREQUAL "controlplane-1.35")
      set(option --k8s-1.35)
    endif()
    add_test(NAME ${fixture}-start
             COMMAND "${script}" start "${CMAKE_BINARY_DIR}/${fixture}" ${option})
    add_test(NAME ${fixture}-stop COMMAND "${script}" stop "${CMAKE_BINARY_DIR}/${fixture}")
    set_tests_properties(${fixture}-start PROPERTIES
      FIXTURES_SETUP ${fixture} LABELS integration TIMEOUT 300)
    set_tests_properties(${fixture}-stop PROPERTIES
      FIXTURES_CLEANUP ${fixture} LABELS integration TIMEOUT 60)
  endforeach()
endfunction()

# chamber_add_controlplane_test(<test>...): plain ctest tests (not GoogleTest) that use the
# control plane.
function(chamber_add_controlplane_test)
  set_tests_properties(${ARGN} PROPERTIES
    FIXTURES_REQUIRED controlplane RESOURCE_LOCK controlplane
    ENVIRONMENT "${CHAMBER_CONTROLPLANE_ENV}")
endfunction()

# The test cases of a GoogleTest binary are known only when ctest discovers them, so their
# properties are set by a file ctest includes right after the discovered list. gtest's
# PROPERTIES argument cannot carry ENVIRONMENT: it splits list values. Integration tests hold
# one lock whichever control plane they use, so they run one at a time.
function(_chamber_require_controlplane target fixture)
  set(dir "${CMAKE_BINARY_DIR}/${fixture}")
  set(env "CHAMBER_TEST_KUBECONFIG=${dir}/kubeconfig" "CHAMBER_TEST_CONTROLPLANE_DIR=${dir}")
  set(file "${CMAKE_CURRENT_BINARY_DIR}/${target}_controlplane.cmake")
  file(WRITE "${file}"
    "if(${target}_TESTS)\n"
    "  set_tests_properties(\${${target}_TESTS} PROPERTIES\n"
    "    FIXTURES_REQUIRED ${fixture} RESOURCE_LOCK controlplane\n"
    "    ENVIRONMENT [==[${env}]==])\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${file}")
endfunction()

# chamber_add_benchmark(NAME <name> SOURCES <src>... [LIBS <lib>...])
# Built with everything else, run by hand: see docs/development.md.
function(chamber_add_benchmark)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME" "SOURCES;LIBS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "chamber_add_benchmark needs NAME and SOURCES")
  endif()
  if(NOT CHAMBER_BUILD_BENCHMARKS)
    return()
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
