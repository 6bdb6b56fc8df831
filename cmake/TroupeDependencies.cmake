# Every third-party dependency, found once, from Debian's packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(msgpack CONFIG REQUIRED)            # target msgpackc-cxx (libmsgpack-cxx-dev)
find_package(ZLIB REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)           # target yaml-cpp (libyaml-cpp-dev 0.7: no namespace)
find_package(OpenBLAS CONFIG REQUIRED)
find_package(CAF 0.17 REQUIRED)                  # cmake/FindCAF.cmake
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)  # libhiredis-dev (its CMake config has no target)
find_package(benchmark CONFIG)                   # Google Benchmark, for bench/ only
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)   # .npz archives (libzip-dev; ZIP64 too)
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)  # WebDataset tar shards (libarchive-dev)
find_package(PNG REQUIRED)                       # PNG members of shards (libpng-dev)
find_package(JPEG REQUIRED)                      # JPEG members (libjpeg62-turbo-dev: libjpeg-turbo)
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5)        # HDF5 datasets (libhdf5-dev, serial)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)  # troupe data tokenize (libsentencepiece-dev)
# cpp-httplib (libcpp-httplib-dev): Debian builds it as a shared library, with OpenSSL, zlib and
# brotli support compiled in; its pkg-config file carries the matching CPPHTTPLIB_* defines, which
# every user of httplib.h must see (they change the classes' layout).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(NOT TARGET troupe::httplib)
  add_library(troupe::httplib INTERFACE IMPORTED)
  set_target_properties(troupe::httplib PROPERTIES INTERFACE_LINK_LIBRARIES PkgConfig::HTTPLIB)
endif()
# The peers of `troupe bench allreduce` (bench/peers/), each optional: built only when found.
option(TROUPE_BENCH_PEERS "Build the Gloo and MPI all-reduce peers of troupe bench allreduce when found" ON)
if(TROUPE_BENCH_PEERS)
  find_package(Gloo CONFIG QUIET)                # target gloo (libgloo-dev)
  find_package(MPI COMPONENTS CXX QUIET)         # target MPI::MPI_CXX (libopenmpi-dev)
endif()

if(NOT TARGET troupe::openblas)
  add_library(troupe::openblas INTERFACE IMPORTED)
  set_target_properties(troupe::openblas PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()

set(TROUPE_DATASET_DIR "/usr/share/datasets/fashion-mnist" CACHE PATH
    "Default Fashion-MNIST directory (Debian package dataset-fashion-mnist)")

# libtorch (Debian's libtorch-dev, or another PyTorch's with -DTorch_DIR=<its share/cmake/Torch>): the
# torchscript model (models/torch/), a library loaded only by the processes that train it. Without
# it troupe builds and its torch tests skip, saying so. The Python that scripts the tests' fixtures
# (python3-torch) is looked for beside it.
option(TROUPE_TORCH "Build the torchscript model when libtorch is found" ON)
set(TROUPE_WITH_TORCH OFF)
if(TROUPE_TORCH)
  find_package(Torch CONFIG QUIET)
  if(Torch_FOUND)
    set(TROUPE_WITH_TORCH ON)
    message(STATUS "troupe: libtorch ${Torch_VERSION} found: the torchscript model is built")
  else()
    message(STATUS "troupe: libtorch not found (install libtorch-dev): no torchscript model")
  endif()
endif()
set(TROUPE_TORCH_PYTHON "")
if(TROUPE_WITH_TORCH)
  foreach(candidate /usr/bin/python3 python3)
    execute_process(COMMAND ${candidate} -c "import torch" RESULT_VARIABLE no_torch OUTPUT_QUIET ERROR_QUIET)
    if(no_torch EQUAL 0)
      set(TROUPE_TORCH_PYTHON ${candidate})
      break()
    endif()
  endforeach()
  if(NOT TROUPE_TORCH_PYTHON)
    message(STATUS "troupe: no python3 with torch (install python3-torch): the torch tests will skip")
  endif()
endif()
