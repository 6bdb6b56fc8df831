// Loading trainer libraries (dlopen, version check, registration) and shipping them through the GCS
// (in-memory store). The libraries are built by tests/trainers/CMakeLists.txt from fixtures/.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/version.h"
#include "gcs/in_memory_store.h"
#include "gcs/tables.h"
#include "trainers/api/trainer.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/library/trainer_library.h"
#include "trainers/library/trainer_library_store.h"
#include "trainers/library/trainer_registry.h"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(TROUPE_TEST_FIXTURE_DIR) + "/lib" + name + ".so"; }

// A fresh directory under the build tree, removed when the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::path(TROUPE_BINARY_DIR) / "tmp" / ("trainer_library_test." + std::to_string(::getpid()) + "." +
                                                  std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a trainer library loads, registers its trainer and trains", "[trainer_library]") {
  auto lib = load_trainer_library(fixture("test_constant_trainer"));
  REQUIRE(lib.ok());
  CHECK(lib->troupe_version == TROUPE_VERSION_STRING);
  CHECK(lib->abi == TROUPE_TRAINER_ABI);
  CHECK(lib->trainers == std::vector<std::string>{"fixture-mean"});
  REQUIRE(trainer_registry().contains("fixture-mean"));
  CHECK(trainer_registry().find("fixture-mean")->origin == fixture("test_constant_trainer"));
  // The library's own registrations stayed its own: this binary's list does not have them.
  for (const TrainerRegistration& r : detail::local_trainer_registrations()) CHECK(std::string(r.name) != "fixture-mean");

  auto again = load_trainer_library(fixture("test_constant_trainer"));
  REQUIRE(again.ok());
  CHECK(again->trainers == lib->trainers);

  Dataset d;  // 3 classes seen 6:3:1: the loss falls from ln 3 towards the labels' entropy
  d.count = 100;
  d.rows = d.cols = 1;
  d.classes = 3;
  for (int i = 0; i < 100; ++i) {
    d.images.push_back(0.0f);
    d.labels.push_back(i % 10 < 6 ? 0 : (i % 10 < 9 ? 1 : 2));
  }
  TrainOptions o;
  o.model = "fixture-mean";
  o.epochs = 5;
  o.batch_size = 10;
  o.lr = 0.05f;
  auto r = train_with_trainer(o, d, d);
  REQUIRE(r.ok());
  CHECK(r->history.front().train_loss < std::log(3.0) + 1e-3);
  CHECK(r->history.back().train_loss < r->history.front().train_loss);
  CHECK(r->test_accuracy == Approx(0.6));
}

TEST_CASE("a library built against another troupe is refused with both versions named", "[trainer_library][errors]") {
  auto lib = load_trainer_library(fixture("test_other_version_trainer"));
  REQUIRE(!lib.ok());
  CHECK(lib.status().code() == Code::version_mismatch);
  CHECK(lib.status().message() == "libtest_other_version_trainer.so was built against troupe 0.0.1 (ABI " +
                                      std::to_string(TROUPE_TRAINER_ABI + 1) + "); this is troupe " +
                                      TROUPE_VERSION_STRING + " (ABI " + std::to_string(TROUPE_TRAINER_ABI) +
                                      "): rebuild it against this version");
}

TEST_CASE("missing, non-ELF and non-trainer libraries are refused with what to do", "[trainer_library][errors]") {
  auto missing = load_trainer_library("/nonexistent/libmine.so");
  CHECK(missing.status().code() == Code::not_found);
  CHECK(missing.status().message() == "trainer library /nonexistent/libmine.so does not exist");

  TempDir dir;
  const std::string text = (dir.path / "libtext.so").string();
  std::ofstream(text) << "not a library\n";
  auto not_elf = load_trainer_library(text);
  CHECK(not_elf.status().code() == Code::invalid_argument);
  CHECK(not_elf.status().message().find("is not a shared library (no ELF header)") != std::string::npos);

  auto plain = load_trainer_library(fixture("test_not_a_trainer"));
  CHECK(plain.status().code() == Code::invalid_argument);
  CHECK(plain.status().message().find("libtest_not_a_trainer.so is not a troupe trainer library: it exports no "
                                      "troupe_trainer_abi()") == 0);

  // A truncated ELF file: dlopen's own reason is passed on.
  const std::string cut = (dir.path / "libcut.so").string();
  std::ofstream(cut, std::ios::binary) << slurp(fixture("test_constant_trainer")).substr(0, 200);
  auto truncated = load_trainer_library(cut);
  CHECK(truncated.status().code() == Code::invalid_argument);
  CHECK(truncated.status().message().find("cannot load trainer library " + cut + ": ") == 0);
}

TEST_CASE("a library registering a taken name is refused whole", "[trainer_library][errors]") {
  auto clash = load_trainer_library(fixture("test_clashing_trainer"));
  REQUIRE(!clash.ok());
  CHECK(clash.status().message().find("registers a trainer named 'mlp', which built-in already registered") !=
        std::string::npos);
  CHECK(!trainer_registry().contains("fixture-unique"));
  CHECK(trainer_registry().find("mlp")->origin == "built-in");
}

TEST_CASE("a trainer library goes through the GCS and into a node's cache", "[trainer_library][gcs]") {
  gcs::InMemoryStore store;
  const std::string path = fixture("test_constant_trainer");
  auto rec = put_trainer_library(store, path);
  REQUIRE(rec.ok());
  const std::string bytes = slurp(path);
  CHECK(rec->checksum == xxh64_hex(bytes));
  CHECK(rec->checksum.size() == 16);
  CHECK(rec->file_name == "libtest_constant_trainer.so");
  CHECK(rec->troupe_version == TROUPE_VERSION_STRING);
  CHECK(rec->size == bytes.size());
  CHECK(rec->trainers == std::vector<std::string>{"fixture-mean"});
  auto listed = gcs::Table<gcs::TrainerLibraryRecord>(store).get(rec->checksum);
  REQUIRE(listed.ok());
  CHECK(listed->trainers == rec->trainers);
  CHECK(put_trainer_library(store, path).ok());  // again: same key, nothing new

  TempDir cache;
  auto fetched = fetch_trainer_library(store, rec->checksum, cache.path.string());
  REQUIRE(fetched.ok());
  CHECK(*fetched == (cache.path / rec->checksum / "libtest_constant_trainer.so").string());
  CHECK(slurp(*fetched) == bytes);
  auto loaded = load_trainer_library(*fetched);  // the same trainer name from another path: refused
  CHECK(!loaded.ok());

  // A damaged cached copy is replaced; a damaged GCS copy is corrupt_data.
  std::ofstream(*fetched, std::ios::binary | std::ios::trunc) << "damaged";
  auto refetched = fetch_trainer_library(store, rec->checksum, cache.path.string());
  REQUIRE(refetched.ok());
  CHECK(slurp(*refetched) == bytes);
  fs::remove_all(cache.path / rec->checksum);
  REQUIRE(store.put(kTrainerLibraryBlobTable, rec->checksum, bytes.substr(0, bytes.size() - 1) + "x").ok());
  auto corrupt = fetch_trainer_library(store, rec->checksum, cache.path.string());
  CHECK(corrupt.status().code() == Code::corrupt_data);
  CHECK(corrupt.status().message().find("the GCS copy is corrupt") != std::string::npos);
  CHECK(!fs::exists(cache.path / rec->checksum / "libtest_constant_trainer.so"));

  auto unknown = fetch_trainer_library(store, "0123456789abcdef", cache.path.string());
  CHECK(unknown.status().code() == Code::not_found);
  CHECK(unknown.status().message().find("no trainer library with checksum 0123456789abcdef") == 0);
}

TEST_CASE("trainer library records round-trip and refuse damage", "[trainer_library][gcs]") {
  gcs::TrainerLibraryRecord r;
  r.checksum = "00ff00ff00ff00ff";
  r.file_name = "libmine.so";
  r.troupe_version = "0.1.0";
  r.abi = 1;
  r.size = 12345;
  r.trainers = {"a", "b"};
  r.stored_ms = 99;
  const std::string bytes = gcs::encode(r);
  gcs::TrainerLibraryRecord back;
  REQUIRE(gcs::decode(bytes, &back).ok());
  CHECK(back.checksum == r.checksum);
  CHECK(back.file_name == r.file_name);
  CHECK(back.trainers == r.trainers);
  CHECK(back.size == r.size);
  CHECK(back.stored_ms == 99);
  gcs::TrainerLibraryRecord untouched;
  CHECK(gcs::decode(bytes.substr(0, bytes.size() - 3), &untouched).code() == Code::corrupt_data);
  CHECK(untouched.file_name.empty());
}
