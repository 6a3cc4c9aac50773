# The test libraries that a checked training loads into its own process, next to the agent:
# built against the training's torch. tests/CMakeLists.txt includes this file; so does the
# top-level CMakeLists.txt for a training-side build (PARITY_TRAINING_TEST_LIBS, with
# PARITY_AGENT_ONLY) against another torch than the server's: scripts/torch-matrix.sh builds one
# per pip torch, and the tests find it by PARITY_TRAINING_BUILD_DIR (tests/e2e/harness.py).
# Each goes to <build>/tests.
set(_parity_training_libs_dir ${CMAKE_CURRENT_LIST_DIR})

# A simulated NPU (test only): torch_npu's schemas with independent CPU kernels and autograd,
# loaded into a training process as torch_npu would be (tests/npu_sim/npu_sim.cc).
add_library(parity_npu_sim SHARED ${_parity_training_libs_dir}/npu_sim/npu_sim.cc)
target_link_libraries(parity_npu_sim PRIVATE parity_oplib_support parity_torch_npu_schemas)
target_compile_options(parity_npu_sim PRIVATE -pthread)
parity_torch_target(parity_npu_sim)
parity_warnings(parity_npu_sim)
# A test accelerator on PrivateUse1, registered the way torch_npu registers the NPU: its own
# allocator (memory the host cannot read), device guard, events, copy kernels (test only).
add_library(parity_test_npu_device SHARED ${_parity_training_libs_dir}/npu_device/npu_device.cc)
target_compile_options(parity_test_npu_device PRIVATE -pthread)
target_include_directories(parity_test_npu_device PRIVATE ${PROJECT_SOURCE_DIR})
parity_torch_target(parity_test_npu_device)
parity_warnings(parity_test_npu_device)
# The simulated accelerator's float16/bfloat16 GEMMs (test only): float32 accumulation, for the
# trainings the e2e suites run on a host whose libtorch rounds partial sums (tests/device).
add_library(parity_test_float32_gemms SHARED ${_parity_training_libs_dir}/device/float32_gemms.cc)
target_compile_options(parity_test_float32_gemms PRIVATE -pthread)
parity_torch_target(parity_test_float32_gemms)
parity_warnings(parity_test_float32_gemms)

set_target_properties(parity_npu_sim parity_test_npu_device parity_test_float32_gemms PROPERTIES
                      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
