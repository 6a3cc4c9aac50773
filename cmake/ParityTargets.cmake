# Helpers shared by Parity's CMake files.

# parity_warnings(<target>): strict warnings for Parity's own code (never for generated code).
function(parity_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Wno-unused-parameter)
  if(PARITY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# parity_torch_target(<target>): marks a target as one of the few that include libtorch headers.
# They share one precompiled header so each torch translation unit costs seconds, not tens.
# Libraries (-fPIC) and executables (-fPIE) cannot share a precompiled header, so there is one of
# each: parity_codec owns the library one, parity_torch_pch_holder (an empty program) the other.
function(parity_torch_target target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    if(NOT TARGET parity_torch_pch_holder)
      add_executable(parity_torch_pch_holder ${PROJECT_SOURCE_DIR}/cmake/empty_main.cc)
      target_link_libraries(parity_torch_pch_holder PRIVATE parity_codec)
      parity_warnings(parity_torch_pch_holder)
      target_precompile_headers(parity_torch_pch_holder
                                PRIVATE ${PROJECT_SOURCE_DIR}/common/torch/torch_pch.h)
    endif()
    target_precompile_headers(${target} REUSE_FROM parity_torch_pch_holder)
  elseif(TARGET parity_codec AND NOT target STREQUAL "parity_codec")
    target_precompile_headers(${target} REUSE_FROM parity_codec)
  else()
    target_precompile_headers(${target} PRIVATE ${PROJECT_SOURCE_DIR}/common/torch/torch_pch.h)
  endif()
endfunction()

# parity_test(NAME <name> SOURCES <files...> LIBS <libs...> LABELS <labels...>)
function(parity_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  parity_warnings(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  # One ctest entry per executable keeps the list short; gtest filters give finer control.
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} --gtest_color=no)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
