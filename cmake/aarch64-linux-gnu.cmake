# Cross-building the agent for arm64 (scripts/aarch64-check.sh): Debian's cross compiler
# (g++-aarch64-linux-gnu) against an arm64 root unpacked from the Debian archive, whose
# libraries (libtorch, gRPC, protobuf, abseil, OpenSSL) are the training host's.
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPARITY_AARCH64_ROOT=<root> ...
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(PARITY_AARCH64_ROOT "$ENV{PARITY_AARCH64_ROOT}" CACHE PATH "the arm64 root")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES PARITY_AARCH64_ROOT)
# Found in the root: libraries, headers, package configs. Run on this machine: programs (protoc,
# grpc_cpp_plugin of the same Debian release, generating the same code).
set(CMAKE_FIND_ROOT_PATH "${PARITY_AARCH64_ROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The root is the sysroot: its glibc, its libraries and their linker scripts; the cross
# compiler brings its own libstdc++ headers (the same GCC 12 as the root's libstdc++).
set(CMAKE_SYSROOT "${PARITY_AARCH64_ROOT}")
set(_root "${PARITY_AARCH64_ROOT}")
# The cross-compiled programs run under qemu-user with the root as their library prefix.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L ${_root})
# pkg-config (gRPC's config asks it for re2) reads the root's .pc files, never this machine's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${_root}/usr/lib/aarch64-linux-gnu/pkgconfig:${_root}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${_root}")
set(ENV{PKG_CONFIG_PATH} "")
