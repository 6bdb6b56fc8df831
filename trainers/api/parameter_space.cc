#include "trainers/api/trainer.h"

namespace troupe {

Param ParameterSpace::declare(const std::string& name, const std::vector<int64_t>& shape, Init init) {
  // Only the first bad declaration is reported: later ones often follow from it.
  auto fail = [&](const std::string& why) {
    if (status_.ok()) status_ = invalid_argument("parameter '" + name + "': " + why);
    return Param{};
  };
  if (name.empty()) return fail("a parameter block needs a name");
  for (const ParamBlock& b : blocks_) {
    if (b.name == name) return fail("declared twice; give every block its own name");
  }
  if (shape.empty()) return fail("a block needs at least one dimension");
  size_t numel = 1;
  for (int64_t d : shape) {
    if (d <= 0) return fail("dimension " + std::to_string(d) + " must be positive");
    if (numel > (size_t{1} << 40) / static_cast<size_t>(d)) return fail("more than 2^40 elements");
    numel *= static_cast<size_t>(d);
  }
  Param p;
  p.index = static_cast<int>(blocks_.size());
  p.offset = size_;
  p.numel = numel;
  blocks_.push_back(ParamBlock{name, shape, init, p, {}});
  size_ += numel;
  return p;
}

Param ParameterSpace::declare(const std::string& name, const std::vector<int64_t>& shape, std::vector<float> values) {
  Init init;
  init.kind = Init::Kind::given;
  const Param p = declare(name, shape, init);
  if (p.index < 0) return p;
  if (values.size() != p.numel) {
    if (status_.ok())
      status_ = invalid_argument("parameter '" + name + "': " + std::to_string(values.size()) + " starting values for " +
                                 std::to_string(p.numel) + " elements");
    return Param{};
  }
  blocks_.back().values = std::move(values);
  return p;
}

Param ParameterSpace::declare_state(const std::string& name, const std::vector<int64_t>& shape,
                                    std::vector<float> values) {
  // An empty shape is a scalar (PyTorch's num_batches_tracked): one float, kept shaped [] so the
  // saved tensor loads back into PyTorch.
  const Param p = declare(name, shape.empty() ? std::vector<int64_t>{1} : shape, std::move(values));
  if (p.index < 0) return p;
  blocks_.back().state = true;
  blocks_.back().shape = shape;
  return p;
}

bool ParameterSpace::has_state() const {
  for (const ParamBlock& b : blocks_)
    if (b.state) return true;
  return false;
}

}  // namespace troupe
