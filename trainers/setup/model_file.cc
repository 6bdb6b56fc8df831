#include "trainers/setup/model_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "core/version.h"
#include "data/safetensors.h"
#include "data/safetensors_writer.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe {

namespace {
std::string dtype_tag(DType t) { return t == DType::bf16 ? "BF16" : t == DType::f16 ? "F16" : "F32"; }

// A state block's tensor as f32: as a parameter's, or from the integers PyTorch keeps some state in
// (BatchNorm's num_batches_tracked is I64), exact up to 2^24.
Expected<std::vector<float>> state_as_f32(const data::NamedTensor& t, const std::string& where) {
  if (t.dtype != "I64" && t.dtype != "I32") return data::tensor_as_f32(t, where);
  const size_t size = t.dtype == "I64" ? 8 : 4, n = t.bytes.size() / size;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t v = 0;
    if (size == 8) std::memcpy(&v, t.bytes.data() + i * 8, 8);
    else { int32_t w = 0; std::memcpy(&w, t.bytes.data() + i * 4, 4); v = w; }
    out[i] = static_cast<float>(v);
  }
  return out;
}
}  // namespace

Expected<std::unique_ptr<ModelWriter>> ModelWriter::create(const std::string& path, const ParameterSpace& space,
                                                           DType dtype,
                                                           const std::map<std::string, std::string>& metadata) {
  std::vector<data::TensorSpec> tensors;
  // State blocks (running statistics, batch counts) stay F32 whatever `dtype`: counts exact to 2^24.
  for (const ParamBlock& b : space.blocks()) tensors.push_back({b.name, dtype_tag(b.state ? DType::f32 : dtype), b.shape});
  auto file = data::SafetensorsWriter::create(path, std::move(tensors), metadata);
  if (!file.ok()) return file.status();
  std::unique_ptr<ModelWriter> w(new ModelWriter());
  w->file_ = std::move(*file);
  w->space_ = &space;
  w->dtype_ = dtype;
  return w;
}

Status ModelWriter::write_range(size_t begin, const float* values, size_t count) {
  const size_t end = begin + count;
  const std::vector<ParamBlock>& blocks = space_->blocks();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Param& p = blocks[i].param;
    const size_t b = std::max(begin, p.offset), e = std::min(end, p.offset + p.numel);
    if (b >= e) continue;
    const float* from = values + (b - begin);
    const uint64_t at = static_cast<uint64_t>(b - p.offset);
    if (dtype_ == DType::f32 || blocks[i].state) {
      TROUPE_RETURN_IF_ERROR(file_->write(i, at * 4, from, (e - b) * 4));
      continue;
    }
    constexpr size_t kPiece = size_t{1} << 18;  // converted a piece at a time
    for (size_t done = 0; done < e - b; done += kPiece) {
      const size_t n = std::min(kPiece, e - b - done);
      half_.resize(n);
      for (size_t k = 0; k < n; ++k)
        half_[k] = dtype_ == DType::bf16 ? f32_to_bf16(from[done + k]) : f32_to_f16(from[done + k]);
      TROUPE_RETURN_IF_ERROR(file_->write(i, (at + done) * 2, half_.data(), n * 2));
    }
  }
  return {};
}

Status ModelWriter::commit() { return file_->commit(); }

Status save_model(const std::string& path, const ParameterSpace& space, const float* params, DType dtype,
                  const std::map<std::string, std::string>& metadata) {
  auto w = ModelWriter::create(path, space, dtype, metadata);
  if (!w.ok()) return w.status();
  TROUPE_RETURN_IF_ERROR((*w)->write_range(0, params, space.size()));
  return (*w)->commit();
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
      auto values = b.state ? state_as_f32(*t, "--init-from " + path) : data::tensor_as_f32(*t, "--init-from " + path);
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

Status save_trained_model(const TrainOptions& o, const Dataset& train, const ParameterSpace& space,
                          const std::string& description, const float* params, const TrainResult& r) {
  const int epochs_done = r.history.empty() ? 0 : r.history.back().epoch;
  return save_model(o.save_path, space, params, o.save_dtype,
                    model_metadata(o, train.spec(), train.normalization, description, r.steps, epochs_done,
                                   r.test_accuracy))
      .with_context("--save");
}

Status save_trained_model(const TrainOptions& o, const Dataset& train, const std::vector<float>& params,
                          const TrainResult& r) {
  auto setup = set_up_trainer(o, train.spec(), 0, 1);
  if (!setup.ok()) return setup.status().with_context("--save");
  if (setup->space.size() != params.size())
    return internal_error("--save: " + std::to_string(params.size()) + " trained parameters but " + setup->where +
                          " declares " + std::to_string(setup->space.size()));
  return save_trained_model(o, train, setup->space, setup->model, params.data(), r);
}

}  // namespace troupe
