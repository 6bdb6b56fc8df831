#include "data/tokenize.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/durable_file.h"
#include "data/dataset_spec.h"

namespace troupe::data {

namespace {

struct SplitTokens {
  std::vector<uint32_t> ids;
  std::vector<size_t> line_ends;  // ids.size() after each line
};

// `ids` as little-endian u16 or u32.
std::string token_bytes(const std::vector<uint32_t>& ids, size_t begin, size_t end, bool wide) {
  std::string out;
  out.reserve((end - begin) * (wide ? 4 : 2));
  for (size_t i = begin; i < end; ++i) {
    const uint32_t v = ids[i];
    out.push_back(char(v & 0xff));
    out.push_back(char((v >> 8) & 0xff));
    if (wide) {
      out.push_back(char((v >> 16) & 0xff));
      out.push_back(char((v >> 24) & 0xff));
    }
  }
  return out;
}

Status make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return {};
    return invalid_argument("--out " + dir + ": exists and is not a directory");
  }
  return io_error("--out " + dir + ": cannot create the directory: " + std::strerror(errno));
}

}  // namespace

Expected<TokenizeReport> tokenize_files(const std::vector<std::string>& files, const TokenizeOptions& options,
                                        const std::string& out_dir) {
  if (!(options.val_fraction >= 0 && options.val_fraction < 1))
    return invalid_argument("--val-fraction " + std::to_string(options.val_fraction) + ": must be in [0, 1)");
  std::map<std::string, std::vector<std::string>> by_split;
  for (const std::string& f : files) {
    std::string split = split_of_file(f).split;
    by_split[split.empty() ? "train" : split].push_back(f);
  }
  if (options.val_fraction > 0 && by_split.count("val"))
    return invalid_argument("--val-fraction: " + by_split["val"].front() +
                            " already names the val split; give either val files or --val-fraction");
  if (!by_split.count("train"))
    return invalid_argument("no training text: every file names another split (" + files.front() + ")");
  TROUPE_RETURN_IF_ERROR(make_dir(out_dir));
  TokenizeReport report;
  report.model = out_dir + "/tokenizer.model";
  // The tokenizer learns from the training text only (what a held-out split is for).
  TROUPE_RETURN_IF_ERROR(train_tokenizer(by_split["train"], options.training, out_dir + "/tokenizer"));
  auto tok = Tokenizer::load(report.model);
  if (!tok.ok()) return tok.status();
  report.vocab = tok->vocab();
  const bool wide = report.vocab > 65536;
  report.token_dtype = wide ? "u32" : "u16";

  std::map<std::string, SplitTokens> splits;
  for (const auto& [split, group] : by_split) {
    SplitTokens& st = splits[split];
    for (const std::string& f : group) {
      std::ifstream in(f, std::ios::binary);
      if (!in) return not_found(f + ": cannot open the text file");
      std::string line;
      while (std::getline(in, line)) {
        auto ids = tok->encode(line);
        if (!ids.ok()) return ids.status().with_context(f);
        for (int id : *ids) st.ids.push_back(uint32_t(id));
        st.ids.push_back(uint32_t(tok->end_of_line()));
        st.line_ends.push_back(st.ids.size());
      }
      if (in.bad()) return io_error(f + ": read error");
    }
  }
  if (options.val_fraction > 0) {  // train's last lines become val, whole lines only
    SplitTokens& train = splits["train"];
    const size_t lines = train.line_ends.size();
    const size_t keep = lines - size_t(options.val_fraction * double(lines));
    if (keep == 0 || keep == lines) {
      return invalid_argument("--val-fraction " + std::to_string(options.val_fraction) + " of " +
                              std::to_string(lines) + " lines leaves " + (keep == 0 ? "no training" : "no val") +
                              " line");
    }
    const size_t cut = train.line_ends[keep - 1];
    SplitTokens& val = splits["val"];
    val.ids.assign(train.ids.begin() + long(cut), train.ids.end());
    for (size_t i = keep; i < lines; ++i) val.line_ends.push_back(train.line_ends[i] - cut);
    train.ids.resize(cut);
    train.line_ends.resize(keep);
  }
  std::ostringstream yaml;
  yaml << "# written by troupe data tokenize: token shards of " << files.size() << " text file(s)\nsplits:\n";
  for (const auto& [split, st] : splits) {
    const std::string name = split + ".bin";
    TROUPE_RETURN_IF_ERROR(
        write_file_durably(out_dir + "/" + name, token_bytes(st.ids, 0, st.ids.size(), wide), "token shard"));
    report.tokens[split] = st.ids.size();
    report.lines[split] = st.line_ends.size();
    yaml << "  " << split << ": " << name << "\n";
  }
  yaml << "token_dtype: " << report.token_dtype << "\ntokenizer: tokenizer.model\n";
  report.yaml = out_dir + "/dataset.yaml";
  TROUPE_RETURN_IF_ERROR(write_file_durably(report.yaml, yaml.str(), "dataset.yaml"));
  return report;
}

}  // namespace troupe::data
