// `troupe generate --prompt TEXT` on a gpt trained on tokenized text (troupe data tokenize): the
// model's vocabulary is the tokenizer's (not just the ids its data happened to use), the prompt is
// encoded with the tokenizer its training data's dataset.yaml names (found through the model
// file's metadata, or given), lines ended as the training data's were, and the continuation comes
// back as text; a tokenizer that is not the model's, or text for a model that reads neither bytes
// nor a tokenizer, is refused by name. A byte-level model (text:FILE) reads any text.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "models/gpt/gpt_generate.h"
#include "tests/core/temp_dir.h"
#include "trainers/local/local_trainer.h"

using namespace troupe;
using troupe::testing::TempDir;

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string story(int lines) {
  static const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "quickly", "and",
                                "slept", "under", "old", "trees"};
  std::ostringstream out;
  unsigned x = 12345;
  for (int i = 0; i < lines; ++i) {
    const int n = 3 + static_cast<int>((x >> 7) % 6);
    for (int w = 0; w < n; ++w) {
      x = x * 1103515245u + 12345u;
      out << (w ? " " : "") << words[(x >> 16) % 15];
    }
    out << "\n";
  }
  return out.str();
}

// A few steps of a small gpt on `data`, saved to `path`: generation needs a model file, not a
// good model.
std::string train_briefly(const std::string& data, const std::string& path) {
  TrainOptions o;
  o.model = "gpt";
  o.trainer_args = {"layers=1", "heads=2", "dim=16"};
  o.data = data;
  o.seq_len = 16;
  o.batch_size = 8;
  o.max_steps = 3;
  o.epochs = 1;
  o.val_fraction = 0.1;
  o.evaluate_each_epoch = false;
  o.save_path = path;
  auto r = train_local(o, {});
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  return r->model;
}

}  // namespace

TEST_CASE("generate: a text prompt goes through the tokenizer the model's data was made with, and comes back as text",
          "[models][gpt][generate]") {
  TempDir dir;
  write_text(dir.file("story.txt"), story(400));
  data::TokenizeOptions t;
  t.training.vocab = 60;
  auto made = data::tokenize_files({dir.file("story.txt")}, t, dir.file("tok"));
  INFO(made.status().to_string());
  REQUIRE(made.ok());
  // The model knows all 60 pieces even if the text never needed some of them.
  CHECK(train_briefly(dir.file("tok"), dir.file("gpt.safetensors")).find("V60") != std::string::npos);

  auto tokenizer = data::Tokenizer::load(dir.file("tok/tokenizer.model"));
  REQUIRE(tokenizer.ok());
  models::GenerateOptions g;
  g.model = dir.file("gpt.safetensors");
  g.text = "the cat sat\non a";
  g.prompt_flag = "--prompt";
  g.tokens = 6;
  g.temperature = 0;
  auto out = models::generate(g);
  INFO(out.status().to_string());
  REQUIRE(out.ok());
  CHECK(out->tokenizer == dir.file("tok/tokenizer.model"));  // found through the model's troupe.data
  std::vector<int> expected = *tokenizer->encode("the cat sat");
  expected.push_back(tokenizer->end_of_line());
  auto second_line = tokenizer->encode("on a");
  REQUIRE(second_line.ok());
  expected.insert(expected.end(), second_line->begin(), second_line->end());
  REQUIRE(out->ids.size() == expected.size() + 6);
  CHECK(std::vector<int>(out->ids.begin(), out->ids.begin() + static_cast<std::ptrdiff_t>(expected.size())) == expected);
  CHECK(out->text.rfind("the cat sat\non a", 0) == 0);  // the prompt, then the continuation
  CHECK(out->text == *tokenizer->decode(std::vector<int>(out->ids.begin(), out->ids.end())));

  SECTION("the same tokenizer given by name") {
    g.tokenizer = dir.file("tok/tokenizer.model");
    auto named = models::generate(g);
    REQUIRE(named.ok());
    CHECK(named->ids == out->ids);
  }
  SECTION("a tokenizer with more pieces than the model has tokens is not its own") {
    auto other = data::tokenize_files({dir.file("story.txt")}, [] {
      data::TokenizeOptions big;
      big.training.vocab = 90;
      return big;
    }(), dir.file("big"));
    REQUIRE(other.ok());
    g.tokenizer = dir.file("big/tokenizer.model");
    auto refused = models::generate(g);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == Code::invalid_argument);
    CHECK_THAT(refused.status().message(), Catch::Contains("--tokenizer: " + dir.file("big/tokenizer.model") +
                                                           " has 90 pieces but the model's vocabulary is 60 tokens"));
  }
  SECTION("text for a model that reads neither bytes nor a tokenizer it can find") {
    std::filesystem::rename(dir.file("tok/tokenizer.model"), dir.file("tok/moved.model"));
    auto refused = models::generate(g);
    REQUIRE_FALSE(refused.ok());
    CHECK_THAT(refused.status().message(), Catch::Contains("--prompt: the model's vocabulary has 60 tokens, so its ids "
                                                           "are not bytes"));
    CHECK_THAT(refused.status().message(), Catch::Contains("give --tokenizer FILE.model"));
  }
}

TEST_CASE("generate: a byte-level model (text:FILE) has every byte in its vocabulary and reads any text",
          "[models][gpt][generate]") {
  TempDir dir;
  write_text(dir.file("story.txt"), story(300));  // lower-case letters, spaces and newlines only
  CHECK(train_briefly("text:" + dir.file("story.txt"), dir.file("bytes.safetensors")).find("V256") !=
        std::string::npos);
  models::GenerateOptions g;
  g.model = dir.file("bytes.safetensors");
  g.text = "Über 9";  // bytes the story never had
  g.prompt_flag = "--prompt";
  g.tokens = 4;
  auto out = models::generate(g);
  INFO(out.status().to_string());
  REQUIRE(out.ok());
  CHECK(out->tokenizer.empty());
  CHECK(out->ids.size() == std::string("Über 9").size() + 4);
  CHECK(out->text.rfind("Über 9", 0) == 0);
}
