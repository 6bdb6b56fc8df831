#!/bin/sh
# Installs the trainer API of this build into a fresh prefix and builds examples/user_trainer
# against it twice, as users would: with find_package(troupe) and with pkg-config.
# Usage: build_user_trainer.sh TROUPE_BUILD_DIR PREFIX WORK_DIR EXAMPLE_DIR CXX
set -eu
build=$1 prefix=$2 work=$3 example=$4 cxx=$5
rm -rf "$prefix" "$work"
mkdir -p "$work"

cmake --install "$build" --prefix "$prefix" --component trainer_api
for f in include/troupe/trainers/api/trainer.h include/troupe/core/status.h include/troupe/core/device.h \
         include/troupe/core/version.h lib/libtroupe_trainer_api.a lib/libtroupe_base.a \
         lib/cmake/troupe/troupeConfig.cmake lib/cmake/troupe/troupeConfigVersion.cmake lib/pkgconfig/troupe.pc; do
  test -f "$prefix/$f" || { echo "install is missing $prefix/$f" >&2; exit 1; }
done

# find_package(troupe), in a project of its own that sees nothing of this source tree.
cmake -S "$example" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_BUILD_TYPE=Release
cmake --build "$work/cmake"
test -f "$work/cmake/libuser_trainer.so"

# pkg-config troupe.
PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --exists --print-errors troupe
# shellcheck disable=SC2046
"$cxx" -O2 -shared -o "$work/libuser_trainer_pc.so" "$example/user_trainer.cc" "$example/next_token.cc" \
  $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs troupe)
echo "built $work/cmake/libuser_trainer.so and $work/libuser_trainer_pc.so against $prefix"
