#include "data/readers/hdf5_reader.h"

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "data/path_names.h"

namespace troupe::data {

namespace {

// Closes an HDF5 handle with its own close function.
struct Handle {
  hid_t id = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;
  Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  ~Handle() {
    if (id >= 0 && close) close(id);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};


// Every dataset's path, depth first in creation order.
herr_t collect(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

// The element type and the native memory type HDF5 converts into; false for anything else.
bool native_type(hid_t file_type, ElemType* type, hid_t* mem) {
  const H5T_class_t cls = H5Tget_class(file_type);
  const size_t size = H5Tget_size(file_type);
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(file_type) == H5T_SGN_2;
    switch (size) {
      case 1: *type = is_signed ? ElemType::i8 : ElemType::u8; *mem = is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8; return true;
      case 2: *type = is_signed ? ElemType::i16 : ElemType::u16; *mem = is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16; return true;
      case 4: *type = is_signed ? ElemType::i32 : ElemType::u32; *mem = is_signed ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32; return true;
      case 8:
        if (!is_signed) return false;
        *type = ElemType::i64;
        *mem = H5T_NATIVE_INT64;
        return true;
      default: return false;
    }
  }
  if (cls == H5T_FLOAT && size == 4) {
    *type = ElemType::f32;
    *mem = H5T_NATIVE_FLOAT;
    return true;
  }
  if (cls == H5T_FLOAT && size == 8) {
    *type = ElemType::f64;
    *mem = H5T_NATIVE_DOUBLE;
    return true;
  }
  return false;
}

constexpr size_t kBlockBytes = size_t{64} << 20;  // rows read per H5Dread: about this many bytes

Expected<Array> read_dataset(hid_t file, const std::string& name, const std::string& where) {
  Handle d(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (d.id < 0) return corrupt_data(where + ": cannot open the dataset");
  Handle ftype(H5Dget_type(d.id), H5Tclose);
  ElemType type;
  hid_t mem;
  if (!native_type(ftype.id, &type, &mem))
    return invalid_argument(where + ": its type is not supported (integers of 1-8 bytes but u64, f32, f64)");
  Handle space(H5Dget_space(d.id), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id);
  if (rank < 0) return corrupt_data(where + ": cannot read its shape");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  std::vector<int64_t> shape(dims.begin(), dims.end());
  const int64_t elements = shape_product(shape);
  if (elements < 0) return corrupt_data(where + ": its shape overflows");
  std::vector<uint8_t> bytes(static_cast<size_t>(elements) * elem_size(type));
  if (elements > 0) {
    if (rank == 0) {
      if (H5Dread(d.id, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
        return corrupt_data(where + ": cannot read it");
    } else {
      const size_t row_bytes = bytes.size() / dims[0];
      const hsize_t block = std::max<hsize_t>(1, kBlockBytes / std::max<size_t>(row_bytes, 1));
      for (hsize_t r = 0; r < dims[0]; r += block) {
        std::vector<hsize_t> start(static_cast<size_t>(rank), 0), count = dims;
        start[0] = r;
        count[0] = std::min(block, dims[0] - r);
        Handle file_space(H5Dget_space(d.id), H5Sclose);
        H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
        Handle mem_space(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
        if (H5Dread(d.id, mem, mem_space.id, file_space.id, H5P_DEFAULT, bytes.data() + r * row_bytes) < 0)
          return corrupt_data(where + ": cannot read rows " + std::to_string(r) + ".." +
                              std::to_string(r + count[0]) + " (damaged file?)");
      }
    }
  }
  return owned_array(type, std::move(shape), std::move(bytes));
}

}  // namespace

bool looks_like_hdf5(const std::string& p) { return ends_with(p, ".h5") || ends_with(p, ".hdf5") || ends_with(p, ".hdf"); }

Expected<std::vector<std::pair<std::string, Array>>> read_hdf5(const std::string& path,
                                                              const std::vector<std::string>& only) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become Status, not prints
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
      if (errno == ENOENT) return not_found(path + ": no such file");
      return io_error(path + ": cannot open: " + std::strerror(errno));
    }
    std::fclose(f);
    return corrupt_data(path + ": not an HDF5 file (or a damaged one)");
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (file.id < 0) return corrupt_data(path + ": cannot open the HDF5 file");
  std::vector<std::string> all;
  if (H5Ovisit2(file.id, H5_INDEX_CRT_ORDER, H5_ITER_INC, collect, &all, H5O_INFO_BASIC) < 0) {
    all.clear();
    if (H5Ovisit2(file.id, H5_INDEX_NAME, H5_ITER_INC, collect, &all, H5O_INFO_BASIC) < 0)
      return corrupt_data(path + ": cannot list its datasets");
  }
  std::vector<std::pair<std::string, Array>> out;
  if (!only.empty()) {
    for (const auto& name : only) {
      if (std::find(all.begin(), all.end(), name) == all.end()) {
        std::string have;
        for (const auto& n : all) have += (have.empty() ? "" : ", ") + n;
        return invalid_argument(path + ": no dataset named '" + name + "' (it has: " + (have.empty() ? "none" : have) + ")");
      }
      auto a = read_dataset(file.id, name, path + "[" + name + "]");
      if (!a.ok()) return a.status();
      out.emplace_back(name, std::move(*a));
    }
    return out;
  }
  for (const auto& name : all) {
    auto a = read_dataset(file.id, name, path + "[" + name + "]");
    if (!a.ok()) {
      if (a.status().code() == Code::invalid_argument) continue;  // a string or compound dataset: not a field
      return a.status();
    }
    if (a->shape.empty()) continue;  // a 0-d value ("version"): metadata, not one value per example
    out.emplace_back(name, std::move(*a));
  }
  if (out.empty()) return invalid_argument(path + ": no numeric datasets in the file");
  return out;
}

}  // namespace troupe::data
