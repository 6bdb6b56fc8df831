#include "data/readers/npz_reader.h"

#include <zip.h>

#include <memory>

#include "data/path_names.h"
#include "data/readers/npy_reader.h"

namespace troupe::data {

namespace {
struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
}  // namespace

Expected<std::vector<std::pair<std::string, Array>>> read_npz(const std::string& path) {
  int err = 0;
  std::unique_ptr<zip_t, ZipCloser> z(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err));
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    const std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    if (err == ZIP_ER_NOENT) return not_found(path + ": no such file");
    if (err == ZIP_ER_OPEN || err == ZIP_ER_READ) return io_error(path + ": cannot read: " + why);
    return corrupt_data(path + ": not a readable .npz (zip) archive: " + why);
  }
  std::vector<std::pair<std::string, Array>> out;
  const zip_int64_t members = zip_get_num_entries(z.get(), 0);
  for (zip_int64_t i = 0; i < members; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      return corrupt_data(path + ": member " + std::to_string(i) + " of the archive cannot be read: " +
                          zip_strerror(z.get()));
    const std::string name = st.name;
    if (!ends_with(name, ".npy"))
      return invalid_argument(path + ": member '" + name + "' is not a .npy array (an .npz holds only arrays)");
    const std::string where = path + "[" + name + "]";
    std::unique_ptr<zip_file_t, FileCloser> f(zip_fopen_index(z.get(), static_cast<zip_uint64_t>(i), 0));
    if (!f) return corrupt_data(where + ": cannot open the member: " + zip_strerror(z.get()));
    auto buf = std::make_shared<std::vector<uint8_t>>();
    auto read = [&](uint8_t* dst, size_t n) -> Expected<size_t> {
      const zip_int64_t r = zip_fread(f.get(), dst, n);
      if (r < 0) return corrupt_data(where + ": cannot decompress: " + zip_file_strerror(f.get()));
      return static_cast<size_t>(r);
    };
    TROUPE_RETURN_IF_ERROR(read_claimed(read, st.size, buf.get(), where));
    uint8_t extra;  // libzip checks the member's CRC when a read meets its end: make one
    auto end = read(&extra, 1);
    if (!end.ok()) return end.status().with_context("checking the CRC");
    if (*end != 0) return corrupt_data(where + ": longer than the archive's directory says");
    auto a = parse_npy(buf, buf->data(), buf->size(), where);
    if (!a.ok()) return a.status();
    out.emplace_back(name.substr(0, name.size() - 4), std::move(*a));
  }
  return out;
}

}  // namespace troupe::data
