#include "data/dataset_spec.h"

#include <glob.h>
#include <unistd.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <dirent.h>
#include <new>
#include <regex>
#include <stdexcept>

#include "data/path_names.h"
#include "data/readers/csv_reader.h"
#include "data/readers/hdf5_reader.h"
#include "data/readers/idx_reader.h"
#include "data/readers/npy_reader.h"
#include "data/readers/npz_reader.h"
#include "data/readers/token_reader.h"
#include "data/readers/webdataset_reader.h"

namespace troupe::data {

namespace {

// `text:FILE` in a spec: any file's bytes as a u8 token stream (byte-level language models).
const std::string kTextPrefix = "text:";

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
bool known_kind(const std::string& path) {
  return ends_with(path, ".npy") || ends_with(path, ".npz") || ends_with(path, ".csv") || ends_with(path, ".bin") ||
         looks_like_idx(path) || looks_like_tar(path) || looks_like_hdf5(path);
}

Expected<std::vector<std::string>> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  if (rc == GLOB_NOMATCH || out.empty()) return not_found("'" + pattern + "' matches no file");
  if (rc != 0) return io_error("'" + pattern + "': glob failed");
  std::sort(out.begin(), out.end());
  return out;
}

// The stem of a file name: without .gz and its extension (IDX names keep theirs but for -ubyte).
std::string stem(const std::string& file) {
  std::string b = base_name(file);
  for (const char* t : {".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tgz"})
    if (ends_with(b, t)) b.resize(b.size() - std::string(t).size());
  if (ends_with(b, ".gz")) b.resize(b.size() - 3);
  static const std::regex idx(R"((.*)-idx[0-9]-ubyte$)");
  std::smatch m;
  if (std::regex_match(b, m, idx)) return m[1];
  const size_t dot = b.find_last_of('.');
  return dot == std::string::npos ? b : b.substr(0, dot);
}

// A field's name from the rest of a file or array name: IDX's images/labels read as image/label.
std::string field_name(const std::string& rest, const std::string& fallback) {
  if (rest.empty()) return fallback;
  if (rest == "images") return "image";
  if (rest == "labels") return "label";
  return rest;
}

struct Reader {
  const SpecOptions& options;
  const std::map<std::string, std::string>& renames;
  bool names_carry_splits;  // false under a yaml's splits: the yaml decides

  std::string rename(const std::string& raw, const std::string& name) const {
    auto it = renames.find(raw);
    if (it != renames.end()) return it->second;
    it = renames.find(name);
    return it != renames.end() ? it->second : name;
  }
  std::pair<std::string, std::string> place(const std::string& raw, const std::string& fallback) const {
    const SplitName s = split_of(raw);
    const std::string split = names_carry_splits && !s.split.empty() ? s.split : "";
    return {split, rename(raw, field_name(s.split.empty() ? raw : s.rest, fallback))};
  }

  // Adds every file's fields to `splits` (the split "" means: the caller's default); WebDataset
  // shards of one split are read together, as one field per extension.
  Status add_all(const std::vector<std::string>& files, std::map<std::string, Table>* splits) const {
    std::map<std::string, std::vector<std::string>> shards;  // by split
    for (const auto& f : files) {
      if (looks_like_tar(f)) {
        shards[names_carry_splits ? split_of_file(f).split : ""].push_back(f);
      } else {
        TROUPE_RETURN_IF_ERROR(add(f, splits));
      }
    }
    for (auto& [split, group] : shards) {
      auto t = read_webdataset(group);
      if (!t.ok()) return t.status();
      for (Field& f : t->fields) {
        f.name = rename(f.name, f.name);
        (*splits)[split].fields.push_back(std::move(f));
      }
    }
    return {};
  }

  // Adds the file's fields to `splits` (the split "" means: the caller's default).
  Status add(const std::string& path, std::map<std::string, Table>* splits) const {
    auto put = [&](const std::string& raw, const std::string& fallback, Array a, const std::string& source) {
      auto [split, name] = place(raw, fallback);
      Field f;
      f.name = name;
      f.array = std::move(a);
      f.source = source;
      (*splits)[split].fields.push_back(std::move(f));
    };
    if (path.rfind(kTextPrefix, 0) == 0) {  // text:FILE, its bytes as u8 tokens
      const std::string file = path.substr(kTextPrefix.size());
      auto a = read_tokens(file, ElemType::u8);
      if (!a.ok()) return a.status();
      // Always the field `tokens` (whatever the file is called), in the split its name carries.
      const std::string split = names_carry_splits ? split_of_file(file).split : "";
      Field f;
      f.name = rename("tokens", "tokens");
      f.array = std::move(*a);
      f.source = file;
      (*splits)[split].fields.push_back(std::move(f));
      return {};
    }
    const std::string st = stem(path);
    if (ends_with(path, ".npy")) {
      auto a = read_npy(path);
      if (!a.ok()) return a.status();
      put(st, "data", std::move(*a), path);
    } else if (ends_with(path, ".npz")) {
      auto members = read_npz(path);
      if (!members.ok()) return members.status();
      for (auto& [name, a] : *members) put(name, "data", std::move(a), path + "[" + name + ".npy]");
    } else if (looks_like_hdf5(path)) {
      auto sets = read_hdf5(path, options.hdf5_datasets);
      if (!sets.ok()) return sets.status();
      for (auto& [name, a] : *sets) put(name, "data", std::move(a), path + "[" + name + "]");
    } else if (ends_with(path, ".csv")) {
      CsvOptions co;
      co.target = options.target;
      auto t = read_csv(path, co);
      if (!t.ok()) return t.status();
      const std::string split = names_carry_splits ? split_of(st).split : "";
      for (Field& f : t->fields) {
        f.name = rename(f.name, f.name);
        (*splits)[split].fields.push_back(std::move(f));
      }
    } else if (looks_like_idx(path)) {
      auto a = read_idx(path);
      if (!a.ok()) return a.status();
      put(st, "data", std::move(*a), path);
    } else if (ends_with(path, ".bin")) {
      ElemType t;
      if (!parse_elem_type(options.token_dtype, &t))
        return invalid_argument("--token-dtype '" + options.token_dtype + "' is not one of u8, u16, u32");
      auto a = read_tokens(path, t);
      if (!a.ok()) return a.status();
      put(st, "tokens", std::move(*a), path);
    } else {
      return invalid_argument(path + ": not a dataset file troupe reads (.npy .npz .csv .bin .tar .h5, IDX *-idxN-ubyte[.gz])");
    }
    return {};
  }
};

Expected<std::vector<std::string>> files_of(const std::string& spec) {
  std::vector<std::string> out;
  for (std::string part : comma_parts(spec)) {
    if (part.rfind(kTextPrefix, 0) == 0) {  // text:FILE or text:GLOB: each file keeps the prefix
      part = part.substr(kTextPrefix.size());
      std::vector<std::string> named{part};
      if (part.find_first_of("*?[") != std::string::npos) {
        auto g = expand_glob(part);
        if (!g.ok()) return g.status();
        named = *g;
      }
      for (const std::string& f : named) {
        if (!exists(f)) return not_found(f + ": no such text file (text:FILE)");
        if (is_dir(f)) return invalid_argument("text:" + f + ": a directory; text: names files (or a glob)");
        out.push_back(std::string(kTextPrefix) + f);
      }
      continue;
    }
    if (part.find_first_of("*?[") != std::string::npos) {
      auto g = expand_glob(part);
      if (!g.ok()) return g.status();
      out.insert(out.end(), g->begin(), g->end());
    } else if (is_dir(part)) {
      DIR* d = ::opendir(part.c_str());
      if (!d) return io_error(part + ": cannot list the directory");
      std::vector<std::string> found;
      while (dirent* e = ::readdir(d)) {
        const std::string p = part + "/" + e->d_name;
        if (e->d_name[0] != '.' && known_kind(p) && !is_dir(p)) found.push_back(p);
      }
      ::closedir(d);
      if (found.empty())
        return not_found(part + ": no dataset files in the directory (.npy .npz .csv .bin .tar .h5, IDX files, or a dataset.yaml)");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      if (!exists(part)) return not_found(part + ": no such file or directory");
      out.push_back(part);
    }
  }
  if (out.empty()) return invalid_argument("--data: no file named");
  return out;
}

// A yaml's tokenizer: its path made absolute against the yaml's folder ("" when it names none).
std::string yaml_tokenizer(const YAML::Node& root, const std::string& path) {
  if (!root["tokenizer"]) return "";
  std::string t = root["tokenizer"].as<std::string>();
  if (!t.empty() && t[0] != '/') t = dir_name(path) + "/" + t;
  return t;
}

Expected<OpenedDataset> open_yaml(const std::string& path, SpecOptions options) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return invalid_argument(path + ": not a readable dataset.yaml: " + e.what());
  }
  OpenedDataset out;
  std::map<std::string, std::string> renames;
  try {
    if (root["target"]) out.target = root["target"].as<std::string>();
    if (root["token_dtype"]) options.token_dtype = root["token_dtype"].as<std::string>();
    if (root["datasets"]) options.hdf5_datasets = root["datasets"].as<std::vector<std::string>>();
    out.tokenizer = yaml_tokenizer(root, path);
    if (options.target.empty()) options.target = out.target;
    if (root["fields"]) {
      if (!root["fields"].IsMap()) return invalid_argument(path + ": 'fields' must map names to new names");
      for (const auto& kv : root["fields"]) renames[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    if (!root["splits"] || !root["splits"].IsMap() || root["splits"].size() == 0)
      return invalid_argument(path + ": a dataset.yaml needs 'splits:' mapping split names to lists of files");
    for (const auto& kv : root) {
      const std::string key = kv.first.as<std::string>();
      if (key != "splits" && key != "fields" && key != "target" && key != "token_dtype" && key != "datasets" &&
          key != "tokenizer") {
        return invalid_argument(path + ": unknown key '" + key +
                                "' (keys: splits, fields, target, token_dtype, datasets, tokenizer)");
      }
    }
    const Reader reader{options, renames, false};
    for (const auto& kv : root["splits"]) {
      const std::string split = kv.first.as<std::string>();
      std::vector<std::string> specs;
      if (kv.second.IsSequence()) {
        for (const auto& f : kv.second) specs.push_back(f.as<std::string>());
      } else {
        specs.push_back(kv.second.as<std::string>());
      }
      std::map<std::string, Table> got;
      for (std::string s : specs) {
        if (s.empty()) continue;
        if (s[0] != '/') s = dir_name(path) + "/" + s;
        auto files = files_of(s);
        if (!files.ok()) return files.status().with_context(path + ", split " + split);
        TROUPE_RETURN_IF_ERROR(reader.add_all(*files, &got));
        out.files.insert(out.files.end(), files->begin(), files->end());
      }
      Table& t = out.splits[split];
      for (auto& [_, part] : got)
        for (Field& f : part.fields) t.fields.push_back(std::move(f));
    }
  } catch (const YAML::Exception& e) {
    return invalid_argument(path + ": " + e.what());
  }
  for (const auto& [name, t] : out.splits) TROUPE_RETURN_IF_ERROR(t.check(path + ", split " + name));
  return out;
}

}  // namespace

SplitName split_of(const std::string& name) {
  static const std::map<std::string, std::string> words{{"train", "train"}, {"val", "val"},     {"valid", "val"},
                                                         {"validation", "val"}, {"test", "test"}, {"t10k", "test"}};
  // Tokens separated by - _ or .; the first token naming a split wins.
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find_first_of("-_./", start);
    if (end == std::string::npos) end = name.size();
    auto it = words.find(name.substr(start, end - start));
    if (it != words.end()) {
      std::string rest = name.substr(0, start) + (end < name.size() ? name.substr(end + 1) : "");
      while (!rest.empty() && std::string("-_./").find(rest.back()) != std::string::npos) rest.pop_back();
      while (!rest.empty() && std::string("-_./").find(rest.front()) != std::string::npos) rest.erase(0, 1);
      return {it->second, rest};
    }
    start = end + 1;
  }
  return {"", name};
}

SplitName split_of_file(const std::string& path) { return split_of(stem(path)); }

std::string absolute_spec(const std::string& spec) {
  if (spec.empty()) return spec;
  char buf[4096];
  const std::string cwd = ::getcwd(buf, sizeof buf) ? buf : ".";
  std::string out;
  for (std::string part : comma_parts(spec)) {
    std::string prefix;
    if (part.rfind(kTextPrefix, 0) == 0) {
      prefix = kTextPrefix;
      part = part.substr(kTextPrefix.size());
    }
    out += (out.empty() ? "" : ",") + prefix + (part[0] == '/' ? part : cwd + "/" + part);
  }
  return out;
}

namespace {
Expected<OpenedDataset> open_dataset_unguarded(const std::string& spec, const SpecOptions& options);
}  // namespace

Expected<OpenedDataset> open_dataset(const std::string& spec, const SpecOptions& options) {
  try {
    return open_dataset_unguarded(spec, options);
  } catch (const std::bad_alloc&) {
    return unavailable(spec + ": too large to load into this process's memory (or a damaged file claiming more than "
                       "it holds); troupe reads datasets whole for now");
  } catch (const std::length_error&) {
    return corrupt_data(spec + ": a file claims a size no buffer can hold (damaged?)");
  }
}

Expected<std::string> tokenizer_of(const std::string& spec) {
  std::string yaml;
  if (ends_with(spec, ".yaml") || ends_with(spec, ".yml")) yaml = spec;
  else if (is_dir(spec) && exists(spec + "/dataset.yaml")) yaml = spec + "/dataset.yaml";
  if (yaml.empty()) return std::string();
  try {
    return yaml_tokenizer(YAML::LoadFile(yaml), yaml);
  } catch (const std::exception& e) {
    return invalid_argument(yaml + ": not a readable dataset.yaml: " + e.what());
  }
}

namespace {
Expected<OpenedDataset> open_dataset_unguarded(const std::string& spec, const SpecOptions& options) {
  if (spec.empty()) return invalid_argument("--data: empty");
  if (ends_with(spec, ".yaml") || ends_with(spec, ".yml")) return open_yaml(spec, options);
  if (is_dir(spec) && exists(spec + "/dataset.yaml")) return open_yaml(spec + "/dataset.yaml", options);
  auto files = files_of(spec);
  if (!files.ok()) return files.status();
  const std::map<std::string, std::string> no_renames;
  const Reader reader{options, no_renames, true};
  std::map<std::string, Table> got;
  OpenedDataset out;
  TROUPE_RETURN_IF_ERROR(reader.add_all(*files, &got));
  out.files = *files;
  for (auto& [split, t] : got) {
    Table& into = out.splits[split.empty() ? "train" : split];
    for (Field& f : t.fields) into.fields.push_back(std::move(f));
  }
  for (const auto& [name, t] : out.splits) TROUPE_RETURN_IF_ERROR(t.check(spec + ", split " + name));
  return out;
}

}  // namespace

}  // namespace troupe::data
