# libFuzzer harnesses (docs/reliability.md, "Hostile input"). Each harness is one source file
# defining LLVMFuzzerTestOneInput over a parser the product uses, with a seed corpus in the
# repository. Two ways to build it:
#
# - CHAMBER_FUZZ=ON (the `fuzz` preset, clang only): a libFuzzer binary fuzz_<name> in the
#   `fuzzers` target, and a line "<name> <binary> <corpus>" in <build>/fuzzers.txt, which
#   scripts/fuzz.sh reads.
# - otherwise (any compiler, any preset): fuzz_<name>_replay, which feeds every file of the
#   corpus to the harness once; it is the ctest test fuzz-replay-<name> (label unit), so the
#   corpus and every regression input in it also run under the asan preset.

include_guard(GLOBAL)

if(CHAMBER_FUZZ)
  add_custom_target(fuzzers)
  set(CHAMBER_FUZZ_MANIFEST "${PROJECT_BINARY_DIR}/fuzzers.txt")
  file(WRITE "${CHAMBER_FUZZ_MANIFEST}" "")
endif()

# chamber_add_fuzzer(NAME <name> SOURCES <src>... [LIBS <lib>...] [DEFINITIONS <def>...]
#                    CORPUS <dir>)
function(chamber_add_fuzzer)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;CORPUS" "SOURCES;LIBS;DEFINITIONS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES OR NOT ARG_CORPUS)
    message(FATAL_ERROR "chamber_add_fuzzer needs NAME, SOURCES and CORPUS")
  endif()
  get_filename_component(corpus "${ARG_CORPUS}" ABSOLUTE)
  if(CHAMBER_FUZZ)
    set(target fuzz_${ARG_NAME})
    add_executable(${target} EXCLUDE_FROM_ALL ${ARG_SOURCES})
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} chamber_warnings)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
    add_dependencies(fuzzers ${target})
    file(APPEND "${CHAMBER_FUZZ_MANIFEST}"
         "${ARG_NAME} ${CMAKE_CURRENT_BINARY_DIR}/${target} ${corpus}\n")
  else()
    set(target fuzz_${ARG_NAME}_replay)
    add_executable(${target} ${ARG_SOURCES}
                             "${PROJECT_SOURCE_DIR}/src/common/fuzz/replay_main.cc")
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} chamber_warnings)
    add_test(NAME fuzz-replay-${ARG_NAME} COMMAND ${target} "${corpus}")
    set_tests_properties(fuzz-replay-${ARG_NAME} PROPERTIES LABELS unit)
  endif()
  target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
endfunction()
