# Helpers shared by Parity's CMake files.

# parity_warnings(<target>): strict warnings for Parity's own code (never for generated code).
function(parity_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wnon-virtual-dtor -Wno-unused-parameter)
  if(PARITY_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The server's floors, from the bottom up (docs/design.md#the-tree): a folder's code includes from
# its own floor or lower ones only.
set(PARITY_SERVER_FLOORS compare random call replay results metrics check service config app)

# parity_layer(<target> <floor> [TORCH_FREE]): compiles <target>, the code of server/<floor>/,
# behind a fence the compiler enforces (issue 67: the layers were a regex's before): a folder,
# searched before the source tree, holding a header named like each header of every floor above
# <floor>, each an #error naming both. An include of a higher floor stops the build there.
# TORCH_FREE also fences off c10/macros/Macros.h, which every torch header includes, so a
# torch-free floor that includes torch, directly or through another header, does not compile.
# PROTO_FREE fences off the generated parity.pb.h and parity.grpc.pb.h the same way: the wire is
# read at the edge (server/call/, server/service/) and nowhere else.
function(parity_layer target floor)
  cmake_parse_arguments(L "TORCH_FREE;PROTO_FREE" "" "" ${ARGN})
  set(_fence ${PROJECT_BINARY_DIR}/layer_fences/${target})
  file(MAKE_DIRECTORY ${_fence})
  list(FIND PARITY_SERVER_FLOORS ${floor} _index)
  if(_index LESS 0)
    message(FATAL_ERROR "parity_layer: ${floor} is not one of PARITY_SERVER_FLOORS")
  endif()
  math(EXPR _above "${_index} + 1")
  set(_higher "")
  list(LENGTH PARITY_SERVER_FLOORS _floors)
  if(_above LESS _floors)
    list(SUBLIST PARITY_SERVER_FLOORS ${_above} -1 _higher)
  endif()
  foreach(_up IN LISTS _higher)
    file(GLOB _headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}
         ${PROJECT_SOURCE_DIR}/server/${_up}/*.h)
    foreach(_h IN LISTS _headers)
      file(CONFIGURE OUTPUT ${_fence}/${_h} CONTENT
           "#error \"server/${floor}/ includes ${_h}: ${_up}/ is a higher floor (docs/design.md#the-tree)\"\n")
    endforeach()
  endforeach()
  if(L_TORCH_FREE)
    file(CONFIGURE OUTPUT ${_fence}/c10/macros/Macros.h CONTENT
         "#error \"server/${floor}/ is torch-free: it includes a torch header (docs/design.md#the-tree)\"\n")
  endif()
  if(L_PROTO_FREE)
    foreach(_pb parity.pb.h parity.grpc.pb.h)
      file(CONFIGURE OUTPUT ${_fence}/parity/v1/${_pb} CONTENT
           "#error \"server/${floor}/ includes parity/v1/${_pb}: the wire is read at the edge, server/call/ and server/service/ (docs/design.md#the-tree)\"\n")
    endforeach()
  endif()
  target_include_directories(${target} BEFORE PRIVATE ${_fence})
  parity_warnings(${target})
endfunction()

# parity_torch_target(<target>): marks a target as one of the few that include libtorch headers.
# They share one precompiled header so each torch translation unit costs seconds, not tens.
# Libraries (-fPIC) and executables (-fPIE) cannot share a precompiled header, so there is one of
# each: parity_torch_wire owns the library one, parity_torch_pch_holder (an empty program) the other.
function(parity_torch_target target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  if(PARITY_TORCH_CXX_FLAGS)
    target_compile_options(${target} PRIVATE ${PARITY_TORCH_CXX_FLAGS})
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    if(NOT TARGET parity_torch_pch_holder)
      add_executable(parity_torch_pch_holder ${PROJECT_SOURCE_DIR}/cmake/empty_main.cc)
      target_link_libraries(parity_torch_pch_holder PRIVATE parity_torch_wire)
      parity_warnings(parity_torch_pch_holder)
      target_precompile_headers(parity_torch_pch_holder
                                PRIVATE ${PROJECT_SOURCE_DIR}/common/torch/torch_pch.h)
    endif()
    target_precompile_headers(${target} REUSE_FROM parity_torch_pch_holder)
  elseif(TARGET parity_torch_wire AND NOT target STREQUAL "parity_torch_wire")
    target_precompile_headers(${target} REUSE_FROM parity_torch_wire)
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

# parity_hide_torch_bundled_protobuf(): a pip torch's include folder holds the headers of the
# libraries it bundles, protobuf among them (3.13 in torch 2.11), and its targets put that folder
# on every torch translation unit's include path, ahead of the system protobuf when that is not in
# /usr/include, and always ahead of it when it is (an implicit folder comes last): parity.pb.h
# then reads another protobuf's headers and does not compile. Each torch target whose include
# folder has a google/protobuf that is not the one found gets, instead, a folder in the build tree
# of links to every entry but google/. Debian's libtorch bundles nothing: no change there.
function(parity_hide_torch_bundled_protobuf)
  set(_ours)
  foreach(_dir IN LISTS Protobuf_INCLUDE_DIRS)
    file(REAL_PATH "${_dir}" _real)
    list(APPEND _ours "${_real}")
  endforeach()
  set(_shadow "${PROJECT_BINARY_DIR}/torch-include")
  set(_made FALSE)
  foreach(_target torch torch_cpu torch_cuda c10 c10_cuda)
    if(NOT TARGET ${_target})
      continue()
    endif()
    get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT _dirs)
      continue()
    endif()
    set(_new)
    set(_changed FALSE)
    foreach(_dir IN LISTS _dirs)
      if(NOT _dir MATCHES "^\\$<" AND EXISTS "${_dir}/google/protobuf")
        file(REAL_PATH "${_dir}" _real)
        if(NOT _real IN_LIST _ours)
          if(NOT _made)  # made afresh: the torch found may have changed since the last run
            set(_made TRUE)
            file(REMOVE_RECURSE "${_shadow}")
            file(MAKE_DIRECTORY "${_shadow}")
            file(GLOB _entries RELATIVE "${_real}" "${_real}/*")
            foreach(_entry IN LISTS _entries)
              if(NOT _entry STREQUAL "google")
                file(CREATE_LINK "${_real}/${_entry}" "${_shadow}/${_entry}" SYMBOLIC)
              endif()
            endforeach()
            message(STATUS "${_dir} bundles protobuf headers: torch's targets use "
                           "${_shadow} (the same folder without google/)")
          endif()
          set(_dir "${_shadow}")
          set(_changed TRUE)
        endif()
      endif()
      list(APPEND _new "${_dir}")
    endforeach()
    if(_changed)
      list(REMOVE_DUPLICATES _new)
      set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_new}")
    endif()
  endforeach()
endfunction()
