# dplace_module(NAME SOURCES ... DEPS ...): one static library per module directory.
function(dplace_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(dplace_${name} STATIC ${ARG_SOURCES})
  target_include_directories(dplace_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(dplace_${name} PUBLIC ${ARG_DEPS} PRIVATE dplace_warnings ${ARG_PRIVATE_DEPS})
endfunction()

# dplace_test(NAME SOURCES ... DEPS ... [LABELS ...]): a GoogleTest binary registered with ctest.
function(dplace_test name)
  if(NOT DPLACE_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main dplace_warnings)
  target_compile_definitions(${name} PRIVATE
    DPLACE_TEST_DATA_DIR="${DPLACE_TEST_DATA_DIR}"
    DPLACE_BINARY="$<TARGET_FILE:dplace>")
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
endfunction()
