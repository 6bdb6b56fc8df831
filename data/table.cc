#include "data/table.h"

#include <cstring>
#include <map>
#include <set>

namespace troupe::data {

const Field* Table::find(const std::string& name) const {
  for (const Field& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> Table::names() const {
  std::vector<std::string> out;
  for (const Field& f : fields) out.push_back(f.name);
  return out;
}

Array text_classes(const std::vector<std::string>& labels, std::vector<std::string>* names) {
  std::map<std::string, int32_t> index;
  for (const auto& l : labels) index.emplace(l, 0);
  names->clear();
  for (auto& [name, id] : index) {
    id = static_cast<int32_t>(names->size());
    names->push_back(name);
  }
  std::vector<uint8_t> b(labels.size() * 4);
  for (size_t i = 0; i < labels.size(); ++i) std::memcpy(b.data() + 4 * i, &index[labels[i]], 4);
  return owned_array(ElemType::i32, {static_cast<int64_t>(labels.size())}, std::move(b));
}

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

Status Table::check(const std::string& where) const {
  if (fields.empty()) return invalid_argument(where + ": no fields (no readable arrays or columns)");
  std::set<std::string> seen;
  for (const Field& f : fields) {
    if (!seen.insert(f.name).second)
      return invalid_argument(where + ": two fields are named '" + f.name + "'; rename one (dataset.yaml fields:)");
    if (f.array.shape.empty())
      return invalid_argument(where + ": field '" + f.name + "' (" + f.source + ") is a 0-d array, not one value per example");
  }
  const Field& first = fields.front();
  for (const Field& f : fields) {
    if (f.array.count() != first.array.count()) {
      return invalid_argument(where + ": fields of different lengths: '" + first.name + "' has " +
                              std::to_string(first.array.count()) + " examples (" + first.source + "), '" + f.name +
                              "' has " + std::to_string(f.array.count()) + " (" + f.source + ")");
    }
  }
  return {};
}

}  // namespace troupe::data
