// A model's file shipped through the GCS (trainers/library/trainer_file_store.h) over the in-memory
// store: stored once by checksum; read from its path when that holds the bytes, else fetched into the
// cache (absent, or other bytes at the path), a cached copy reused; a corrupt copy, a file the GCS
// lacks and one over the limit refused with errors naming the file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "trainers/library/trainer_file_store.h"
#include "trainers/library/trainer_library_store.h"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("trainer files: stored by checksum, read from the path that holds them, else from the GCS's copy in the cache",
          "[library][files]") {
  testing::TempDir dir;
  gcs::InMemoryStore store;
  const std::string module = dir.file("net.pt"), cache = dir.file("cache");
  write(module, "the module's bytes");
  auto sum = put_trainer_file(store, module);
  REQUIRE(sum.ok());
  CHECK(*sum == xxh64_hex("the module's bytes"));
  CHECK(put_trainer_file(store, module).value() == *sum);  // the same bytes again: nothing new

  // The path holds the bytes: used as it is, nothing fetched.
  CHECK(local_trainer_file(&store, module, *sum, cache).value() == module);
  CHECK_FALSE(fs::exists(cache));

  // Gone from the path: the GCS's copy, under <cache>/<checksum>/<file name>; then reused without the GCS.
  fs::remove(module);
  auto fetched = local_trainer_file(&store, module, *sum, cache);
  INFO(fetched.status().to_string());
  REQUIRE(fetched.ok());
  CHECK(*fetched == cache + "/" + *sum + "/net.pt");
  CHECK(read(*fetched) == "the module's bytes");
  CHECK(local_trainer_file(nullptr, module, *sum, cache).value() == *fetched);

  // Other bytes at the path (another version of the module): the job's bytes still, from the copy.
  write(module, "an edited module");
  CHECK(local_trainer_file(&store, module, *sum, cache).value() == *fetched);

  // A cached copy damaged on disk is fetched again.
  write(*fetched, "damaged");
  CHECK(read(local_trainer_file(&store, module, *sum, cache).value()) == "the module's bytes");
}

TEST_CASE("trainer files: a corrupt GCS copy, a file the GCS lacks and a file over the limit are refused naming the file",
          "[library][files][errors]") {
  testing::TempDir dir;
  gcs::InMemoryStore store;
  const std::string module = dir.file("net.pt"), cache = dir.file("cache");
  write(module, "the module's bytes");
  const std::string sum = put_trainer_file(store, module).value();
  fs::remove(module);

  REQUIRE(store.put(kTrainerFileBlobTable, sum, "flipped bits").ok());
  auto corrupt = local_trainer_file(&store, module, sum, cache);
  CHECK(corrupt.status().code() == Code::corrupt_data);
  CHECK_THAT(corrupt.status().message(), Catch::Contains(module) && Catch::Contains("corrupt"));

  auto missing = local_trainer_file(&store, module, "0123456789abcdef", cache);
  CHECK(missing.status().code() == Code::not_found);
  CHECK_THAT(missing.status().message(), Catch::Contains(module) && Catch::Contains("submit the job again"));
  auto no_gcs = local_trainer_file(nullptr, module, "0123456789abcdef", cache);
  CHECK(no_gcs.status().code() == Code::not_found);
  CHECK_THAT(no_gcs.status().message(), Catch::Contains("not on this machine"));

  auto absent = put_trainer_file(store, module);
  CHECK(absent.status().code() == Code::not_found);
  CHECK_THAT(absent.status().message(), Catch::Contains(module));

  // One byte over the limit (a sparse file: no disk spent).
  const std::string big = dir.file("big.pt");
  write(big, "");
  fs::resize_file(big, kMaxTrainerFileBytes + 1);
  auto over = put_trainer_file(store, big);
  CHECK(over.status().code() == Code::invalid_argument);
  CHECK_THAT(over.status().message(), Catch::Contains(big) && Catch::Contains("at most 64 MiB"));
}
