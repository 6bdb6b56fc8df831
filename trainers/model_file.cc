#include "trainers/model_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "core/version.h"
#include "data/safetensors.h"

namespace troupe {

namespace {
std::string dtype_tag(DType t) { return t == DType::bf16 ? "BF16" : t == DType::f16 ? "F16" : "F32"; }
}  // namespace

Status save_model(const std::string& path, const ParameterSpace& space, const float* params, DType dtype,
                  const std::map<std::string, std::string>& metadata) {
  data::TensorFile file;
  file.metadata = metadata;
  for (const ParamBlock& b : space.blocks()) {
    data::NamedTensor t;
    t.name = b.name;
    t.dtype = dtype_tag(dtype);
    t.shape = b.shape;
    const float* p = params + b.param.offset;
    if (dtype == DType::f32) {
      const uint8_t* raw = reinterpret_cast<const uint8_t*>(p);
      t.bytes.assign(raw, raw + b.param.numel * 4);  // no zero-filling pass first
    } else {
      t.bytes.resize(b.param.numel * 2);
      for (size_t i = 0; i < b.param.numel; ++i) {
        const uint16_t h = dtype == DType::bf16 ? f32_to_bf16(p[i]) : f32_to_f16(p[i]);
        std::memcpy(t.bytes.data() + 2 * i, &h, 2);
      }
    }
    file.tensors.push_back(std::move(t));
  }
  return write_safetensors(path, file);
}

Status check_save_target(const std::string& path, const std::string& flag) {
  const std::string dir = path.substr(0, path.find_last_of('/') + 1);
  if (::access((dir.empty() ? "." : dir).c_str(), W_OK) != 0) {
    const int e = errno;
    return invalid_argument(flag + " " + path + ": cannot write into " + (dir.empty() ? "." : dir) + " (" +
                            std::strerror(e) + "); " +
                            (e == ENOENT ? "create the folder first" : "choose a folder this user can write"));
  }
  return {};
}

Status load_model_into(const std::string& path, const ParameterSpace& space, const std::string& trainer, bool partial,
                       float* params) {
  auto file = data::read_safetensors(path);
  if (!file.ok()) return file.status().with_context("--init-from");
  auto it = file->metadata.find(kModelTrainer);
  if (it != file->metadata.end() && it->second != trainer && !partial)
    return invalid_argument("--init-from " + path + ": a model of trainer '" + it->second + "', not '" + trainer +
                            "' (--init-partial loads the blocks that match)");
  // What goes where once everything checked out: f32 tensors straight from the file's bytes, others
  // converted first.
  struct Load {
    const ParamBlock* block;
    const uint8_t* f32 = nullptr;
    std::vector<float> converted;
  };
  std::vector<Load> loads;
  std::set<std::string> used;
  for (const ParamBlock& b : space.blocks()) {
    const data::NamedTensor* t = file->find(b.name);
    if (!t) {
      if (partial) continue;
      return invalid_argument("--init-from " + path + ": no tensor '" + b.name + "' for the block of that name (" +
                              "--init-partial keeps the blocks the file lacks as initialised)");
    }
    if (t->shape != b.shape) {
      std::string want, got;
      for (int64_t d : b.shape) want += (want.empty() ? "" : ",") + std::to_string(d);
      for (int64_t d : t->shape) got += (got.empty() ? "" : ",") + std::to_string(d);
      return invalid_argument("--init-from " + path + ": tensor '" + b.name + "' is [" + got + "], the block is [" +
                              want + "] (other layer sizes?)");
    }
    if (t->dtype == "F32") {
      loads.push_back({&b, t->bytes.data(), {}});
    } else {
      auto values = data::tensor_as_f32(*t, "--init-from " + path);
      if (!values.ok()) return values.status();
      loads.push_back({&b, nullptr, std::move(*values)});
    }
    used.insert(b.name);
  }
  if (!partial) {
    for (const data::NamedTensor& t : file->tensors)
      if (!used.count(t.name))
        return invalid_argument("--init-from " + path + ": tensor '" + t.name + "' is no block of trainer '" + trainer +
                                "' (a model file of another trainer? --init-partial ignores it)");
  }
  if (loads.empty()) return invalid_argument("--init-from " + path + ": no tensor matches a block of trainer '" + trainer + "'");
  for (const Load& l : loads)
    std::memcpy(params + l.block->param.offset, l.f32 ? static_cast<const void*>(l.f32) : l.converted.data(),
                l.block->param.numel * sizeof(float));
  return {};
}

std::map<std::string, std::string> model_metadata(const TrainOptions& o, const DataSpec& data,
                                                  const std::string& normalization, const std::string& description,
                                                  int64_t step, int epoch, double test_accuracy) {
  std::string args;
  for (const auto& a : o.trainer_args) args += (args.empty() ? "" : ";") + a;
  std::string hidden;
  for (int h : o.hidden) hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
  std::map<std::string, std::string> m{{kModelTrainer, o.model},
                                       {"troupe.description", description},
                                       {"troupe.trainer_args", args},
                                       {"troupe.hidden", hidden},
                                       {"troupe.data", o.data.empty() ? o.dataset : o.data},
                                       {"troupe.inputs", [&] {
                                          std::string s;
                                          for (const auto& i : o.inputs) s += (s.empty() ? "" : ",") + i;
                                          return s;
                                        }()},
                                       {"troupe.target", o.target},
                                       {"troupe.step", std::to_string(step)},
                                       {"troupe.epoch", std::to_string(epoch)},
                                       {"troupe.version", TROUPE_VERSION_STRING}};
  if (test_accuracy >= 0) m["troupe.test_accuracy"] = std::to_string(test_accuracy);
  m["troupe.features"] = std::to_string(data.features);
  m["troupe.classes"] = std::to_string(data.classes);
  m["troupe.target_width"] = std::to_string(data.target_width);
  m["troupe.loss"] = o.loss;
  if (o.seq_len > 0) m["troupe.seq_len"] = std::to_string(o.seq_len);
  std::string schema;
  for (const FieldSpec& f : data.fields) schema += (schema.empty() ? "" : "; ") + f.describe() + (f.target ? " (target)" : "");
  m["troupe.schema"] = schema;
  if (!o.normalize.empty() && o.normalize != "none") m["troupe.normalize"] = o.normalize;
  if (!normalization.empty()) m["troupe.normalization"] = normalization;
  return m;
}

}  // namespace troupe
