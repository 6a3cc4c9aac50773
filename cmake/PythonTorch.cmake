# The torch of a Python environment, taken the way torch.utils.cpp_extension takes it: its
# headers, its CPU libraries and its C++ ABI, read from the installed package itself, without its
# CMake config. That config, in PyPI's CUDA wheels, stops the configure when the host has no CUDA
# toolkit ("Your installed Caffe2 version uses CUDA but I cannot find the CUDA libraries", torch
# 2.1) or one of another release (torch 2.1 and CUDA 13: "Failed to find nvToolsExt"), and an
# Ascend training host has neither. The agent needs none of it: it uses no CUDA API of torch's.
#
# python/setup.py sets, for an agent-only build:
#   PARITY_PYTHON_TORCH             the package folder (os.path.dirname(torch.__file__))
#   PARITY_PYTHON_TORCH_CXX11_ABI   torch._C._GLIBCXX_USE_CXX11_ABI as 0 or 1
# and this file defines what find_package(Torch) would for Parity's CMake files: the imported
# target torch, TORCH_LIBRARIES, TORCH_INCLUDE_DIRS and TORCH_CXX_FLAGS.
if(NOT PARITY_PYTHON_TORCH_CXX11_ABI MATCHES "^[01]$")
  message(FATAL_ERROR "PARITY_PYTHON_TORCH needs PARITY_PYTHON_TORCH_CXX11_ABI, 0 or 1 "
                      "(torch._C._GLIBCXX_USE_CXX11_ABI), not '${PARITY_PYTHON_TORCH_CXX11_ABI}'")
endif()
set(TORCH_INCLUDE_DIRS "${PARITY_PYTHON_TORCH}/include"
                       "${PARITY_PYTHON_TORCH}/include/torch/csrc/api/include")
set(_parity_torch_libs)
foreach(_name torch torch_cpu c10)
  find_library(PARITY_PYTHON_TORCH_${_name} ${_name} PATHS "${PARITY_PYTHON_TORCH}/lib"
               NO_DEFAULT_PATH)
  if(NOT PARITY_PYTHON_TORCH_${_name})
    message(FATAL_ERROR "PARITY_PYTHON_TORCH=${PARITY_PYTHON_TORCH}: no lib${_name}.so in its lib/ "
                        "folder: is it the folder of an installed torch package?")
  endif()
  list(APPEND _parity_torch_libs "${PARITY_PYTHON_TORCH_${_name}}")
endforeach()
foreach(_dir IN LISTS TORCH_INCLUDE_DIRS)
  if(NOT EXISTS "${_dir}")
    message(FATAL_ERROR "PARITY_PYTHON_TORCH=${PARITY_PYTHON_TORCH}: no ${_dir} (a torch without "
                        "its C++ headers cannot build the agent)")
  endif()
endforeach()
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${PARITY_PYTHON_TORCH_CXX11_ABI}")
add_library(torch SHARED IMPORTED)
list(GET _parity_torch_libs 0 _torch_lib)
list(REMOVE_AT _parity_torch_libs 0)
set_target_properties(torch PROPERTIES
  IMPORTED_LOCATION "${_torch_lib}"
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
  INTERFACE_LINK_LIBRARIES "${_parity_torch_libs}"
  INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}")
# The C++ standard its headers need: C++17 up to torch 2.x's later releases, which ask for C++20
# (ATen/ATen.h stops the build with "C++20 or later compatible compiler is required", torch
# 2.15). Every target that links torch then compiles with it; the transport keeps C++17.
file(STRINGS "${PARITY_PYTHON_TORCH}/include/ATen/ATen.h" _parity_cxx20 REGEX "C\\+\\+20 or later")
if(_parity_cxx20)
  set_property(TARGET torch PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)
  message(STATUS "torch: its headers need C++20; the torch half is compiled as C++20")
endif()
set(TORCH_LIBRARIES torch)
set(Torch_FOUND TRUE)
message(STATUS "torch: ${PARITY_PYTHON_TORCH} (its headers and CPU libraries, "
               "_GLIBCXX_USE_CXX11_ABI=${PARITY_PYTHON_TORCH_CXX11_ABI}; its CMake config not read)")
