// Test helper: a fresh directory under the system temp dir, removed with everything in it on
// destruction, so that every test that writes files starts clean and leaves nothing behind.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace troupe::testing {

class TempDir {
 public:
  // Under `base` (created if missing), or the system temp dir when it is empty.
  explicit TempDir(const std::string& base = "") {
    std::filesystem::path dir = base.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(base);
    if (!base.empty()) std::filesystem::create_directories(dir);
    std::string pattern = (dir / "troupe-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  // TROUPE_TEST_KEEP=1 keeps every directory (logs of a cluster test, to read after it) and names it.
  ~TempDir() {
    if (const char* keep = std::getenv("TROUPE_TEST_KEEP"); keep && *keep && std::string(keep) != "0") {
      std::fprintf(stderr, "TROUPE_TEST_KEEP: kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace troupe::testing
