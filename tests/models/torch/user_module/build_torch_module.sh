#!/bin/sh
# Installs the trainer API of this build into a fresh prefix and builds examples/torch_model (a
# libtorch module in C++) against it and the libtorch CMake finds, as users do; then the same library
# once more with its module compiled as if against libtorch 9.9.0 (the adapter's objects relinked),
# for the error a library built against another libtorch gets.
# Usage: build_torch_module.sh TROUPE_BUILD_DIR PREFIX WORK_DIR EXAMPLE_DIR CXX
set -eu
build=$1 prefix=$2 work=$3 example=$4 cxx=$5
rm -rf "$prefix" "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" --component trainer_api
cmake -S "$example" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=Release
cmake --build "$work/cmake" -j2
test -f "$work/cmake/libtorch_net.so"

# net.cc again, claiming libtorch 9.9.0, linked with the same adapter objects and libraries.
dir=$work/cmake/CMakeFiles/torch_net.dir
defines=$(sed -n 's/^CXX_DEFINES = //p' "$dir/flags.make")
includes=$(sed -n 's/^CXX_INCLUDES = //p' "$dir/flags.make")
flags=$(sed -n 's/^CXX_FLAGS = //p' "$dir/flags.make")
eval "\"$cxx\" $defines $includes $flags -DTROUPE_TORCH_COMPILED_VERSION='\"9.9.0\"' -c \"$example/net.cc\" -o \"$work/net_9.9.o\""
link=$(cat "$dir/link.txt")
link=$(echo "$link" | sed "s#CMakeFiles/torch_net.dir/net.cc.o#$work/net_9.9.o#; s#-o libtorch_net.so#-o $work/libtorch_net_9.9.so#")
(cd "$work/cmake" && eval "$link")
test -f "$work/libtorch_net_9.9.so"
echo "built $work/cmake/libtorch_net.so and $work/libtorch_net_9.9.so against $prefix"
