// troupe data tokenize (data/tokenize.h, data/tokenizer.h): a SentencePiece tokenizer trained on
// text files, the text written as token shards that decode back to exactly that text, the
// shards opened by --data DIR with the tokenizer's path; text:FILE as byte tokens; refusals.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "data/dataset_spec.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "tests/core/temp_dir.h"
#include "tests/support/run_command.h"

namespace troupe {
namespace {

using testing::TempDir;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// Lines of a small made-up language, with what a tokenizer must keep: runs of spaces, a tab,
// accents, CJK, and an empty line.
std::string corpus(int lines, int seed) {
  static const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran",
                                "café", "über", "日本", "quickly", "and", "slept"};
  std::ostringstream out;
  unsigned x = unsigned(seed) * 2654435761u + 1;
  for (int i = 0; i < lines; ++i) {
    if (i % 17 == 5) {
      out << "\n";
      continue;
    }
    const int n = 3 + int((x >> 7) % 8);
    for (int w = 0; w < n; ++w) {
      x = x * 1103515245u + 12345u;
      out << (w ? ((x >> 20) % 11 == 0 ? "  " : ((x >> 20) % 13 == 0 ? "\t" : " ")) : "") << words[(x >> 16) % 15];
    }
    out << (i % 3 == 0 ? "." : "") << "\n";
  }
  return out.str();
}

std::vector<int> read_u16(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<int> ids;
  unsigned char b[2];
  while (f.read(reinterpret_cast<char*>(b), 2)) ids.push_back(b[0] | (b[1] << 8));
  return ids;
}

std::string tail_lines(const std::string& text, size_t n) {
  size_t pos = text.size() - 1;  // the final '\n'
  for (size_t seen = 0; seen < n; ++seen) pos = text.rfind('\n', pos - 1);
  return text.substr(pos + 1);
}

TEST_CASE("tokenize: the shards decode back to exactly the text, split by file name and by fraction", "[data][tokenize]") {
  TempDir dir;
  const std::string train_text = corpus(600, 1), test_text = corpus(60, 2);
  write_text(dir.file("story.txt"), train_text);
  write_text(dir.file("story-test.txt"), test_text);
  data::TokenizeOptions o;
  o.training.vocab = 80;
  o.val_fraction = 0.1;
  auto report = data::tokenize_files({dir.file("story.txt"), dir.file("story-test.txt")}, o, dir.file("out"));
  INFO(report.status().to_string());
  REQUIRE(report.ok());
  CHECK(report->vocab == 80);
  CHECK(report->token_dtype == "u16");
  CHECK(report->lines.at("train") == 540);
  CHECK(report->lines.at("val") == 60);
  CHECK(report->lines.at("test") == 60);

  auto tok = data::Tokenizer::load(dir.file("out/tokenizer.model"));
  REQUIRE(tok.ok());
  const std::vector<int> train = read_u16(dir.file("out/train.bin")), val = read_u16(dir.file("out/val.bin")),
                         test = read_u16(dir.file("out/test.bin"));
  CHECK(train.size() == report->tokens.at("train"));
  for (int id : train) REQUIRE((id >= 0 && id < 80));
  // train + val is the training text, whole lines each; test is its own file.
  auto t = tok->decode(train), v = tok->decode(val), s = tok->decode(test);
  REQUIRE((t.ok() && v.ok() && s.ok()));
  CHECK(*t + *v == train_text);
  CHECK(*v == tail_lines(train_text, 60));
  CHECK(*s == test_text);
  // Pieces, not bytes: the tokenizer compresses the text.
  CHECK(train.size() < train_text.size() * 0.8);

  // --data DIR opens the shards through the dataset.yaml, with the tokenizer's path.
  auto opened = data::open_dataset(dir.file("out"));
  INFO(opened.status().to_string());
  REQUIRE(opened.ok());
  CHECK(opened->tokenizer == dir.file("out") + "/tokenizer.model");
  REQUIRE(opened->splits.count("val"));
  const data::Field* f = opened->splits.at("train").find("tokens");
  REQUIRE(f);
  CHECK(f->array.type == data::ElemType::u16);
  CHECK(f->array.count() == int64_t(train.size()));

  // Encoding a line gives the ids the shard holds for it.
  const std::string first = train_text.substr(0, train_text.find('\n'));
  auto ids = tok->encode(first);
  REQUIRE(ids.ok());
  REQUIRE(train.size() > ids->size());
  CHECK(std::vector<int>(train.begin(), train.begin() + long(ids->size())) == *ids);
  CHECK(train[ids->size()] == tok->end_of_line());
  CHECK(tok->decode({0, 80}).status().code() == Code::invalid_argument);
}

TEST_CASE("tokenize: the command line, and what it refuses", "[data][tokenize]") {
  TempDir dir;
  write_text(dir.file("a.txt"), corpus(200, 3));
  write_text(dir.file("a-val.txt"), corpus(20, 4));
  write_text(dir.file("empty.txt"), "\n\n");
  const std::string troupe = testing::troupe_binary();
  auto ok = testing::run_command(troupe + " data tokenize --vocab 60 --model-type unigram " + dir.file("a.txt") + " " +
                                 dir.file("a-val.txt") + " --out " + dir.file("out") + " --json");
  INFO(ok.both());
  REQUIRE(ok.exit_code == 0);
  CHECK(ok.out.find("\"vocab\":60") != std::string::npos);
  CHECK(ok.out.find("\"val\"") != std::string::npos);

  auto small = testing::run_command(troupe + " data tokenize --vocab 6 " + dir.file("a.txt") + " --out " + dir.file("o2"));
  CHECK(small.exit_code != 0);
  CHECK(small.err.find("Vocabulary size is smaller than required_chars") != std::string::npos);
  CHECK(small.err.find("--vocab 6") != std::string::npos);

  auto both = testing::run_command(troupe + " data tokenize --vocab 60 --val-fraction 0.1 " + dir.file("a.txt") + " " +
                                   dir.file("a-val.txt") + " --out " + dir.file("o3"));
  CHECK(both.exit_code != 0);
  CHECK(both.err.find("either val files or --val-fraction") != std::string::npos);

  auto empty = testing::run_command(troupe + " data tokenize --vocab 60 " + dir.file("empty.txt") + " --out " + dir.file("o4"));
  CHECK(empty.exit_code != 0);
  CHECK(empty.err.find("no non-empty line") != std::string::npos);

  write_text(dir.file("plain"), "x");
  auto not_dir = testing::run_command(troupe + " data tokenize --vocab 60 " + dir.file("a.txt") + " --out " + dir.file("plain"));
  CHECK(not_dir.exit_code != 0);
  CHECK(not_dir.err.find("not a directory") != std::string::npos);

  CHECK(data::Tokenizer::load(dir.file("a.txt")).status().code() == Code::invalid_argument);
  CHECK(data::Tokenizer::load(dir.file("missing.model")).status().code() == Code::not_found);
}

TEST_CASE("text:FILE reads any file's bytes as u8 tokens", "[data][tokenize]") {
  TempDir dir;
  const std::string text = "héllo, world\nsecond line\n";
  write_text(dir.file("notes-train.txt"), text);
  write_text(dir.file("notes-val.txt"), "val\n");
  auto opened = data::open_dataset("text:" + dir.file("notes-*.txt"));
  INFO(opened.status().to_string());
  REQUIRE(opened.ok());
  const data::Field* f = opened->splits.at("train").find("tokens");
  REQUIRE(f);
  CHECK(f->array.type == data::ElemType::u8);
  REQUIRE(f->array.count() == int64_t(text.size()));
  CHECK(std::string(reinterpret_cast<const char*>(f->array.bytes), text.size()) == text);
  CHECK(opened->splits.at("val").count() == 4);
  CHECK(data::open_dataset("text:" + dir.file("absent.txt")).status().code() == Code::not_found);
  CHECK(data::open_dataset("text:" + dir.path()).status().code() == Code::invalid_argument);
}

}  // namespace
}  // namespace troupe
