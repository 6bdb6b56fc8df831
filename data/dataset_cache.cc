#include "data/dataset_cache.h"

#include <sys/stat.h>

#include <map>
#include <mutex>
#include <utility>

namespace troupe {
namespace {

// What a file looked like when it was read: a different size or time means read it again.
struct FileStamp {
  int64_t size = -1;
  int64_t mtime_ns = -1;
  bool operator==(const FileStamp& o) const { return size == o.size && mtime_ns == o.mtime_ns; }
};

FileStamp stamp_of(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

struct Entry {
  FileStamp images, labels;
  std::shared_ptr<const Dataset> data;
};

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::pair<std::string, int>, Entry>& cache() {
  static std::map<std::pair<std::string, int>, Entry> entries;
  return entries;
}

}  // namespace

Expected<std::shared_ptr<const Dataset>> cached_fashion_mnist(const std::string& dir, Split split) {
  const FashionMnistFiles files = fashion_mnist_files(dir, split);
  const FileStamp images = stamp_of(files.images);
  const FileStamp labels = stamp_of(files.labels);
  // One lock over the load too: a second caller for the same split waits for the first's load
  // instead of decoding the same files beside it.
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto key = std::make_pair(dir, static_cast<int>(split));
  auto it = cache().find(key);
  if (it != cache().end() && it->second.images == images && it->second.labels == labels) return it->second.data;
  auto loaded = load_fashion_mnist(dir, split);
  if (!loaded.ok()) return loaded.status();
  Entry e{images, labels, std::make_shared<const Dataset>(std::move(*loaded))};
  cache()[key] = e;
  return e.data;
}

size_t dataset_cache_size() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return cache().size();
}

}  // namespace troupe
