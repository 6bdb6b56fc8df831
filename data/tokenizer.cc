#include "data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

namespace troupe::data {

namespace {

// The training text, one sentence per non-empty line, from every file in order. SentencePiece
// samples max_sentences of them itself when there are more.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& files) : files_(files) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (error_.empty()) return {};
    return sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound, error_);
  }
  size_t lines() const { return lines_; }

 private:
  void advance() {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) {
        if (line_.empty()) continue;
        ++lines_;
        return;
      }
      if (in_.is_open() && in_.bad()) {
        error_ = files_[next_ - 1] + ": read error";
        done_ = true;
        return;
      }
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_.close();
      in_.clear();
      in_.open(files_[next_++], std::ios::binary);
      if (!in_) {
        error_ = files_[next_ - 1] + ": cannot open the text file";
        done_ = true;
        return;
      }
    }
  }

  const std::vector<std::string>& files_;
  size_t next_ = 0, lines_ = 0;
  std::ifstream in_;
  std::string line_, error_;
  bool done_ = false;
};

Status from_sp(const sentencepiece::util::Status& st, const std::string& what) {
  if (st.ok()) return {};
  return invalid_argument(what + ": " + st.ToString());
}

}  // namespace

Status train_tokenizer(const std::vector<std::string>& files, const TokenizerTraining& how, const std::string& prefix) {
  if (files.empty()) return invalid_argument("tokenizer: no text file to train on");
  if (how.vocab < 4) return invalid_argument("--vocab " + std::to_string(how.vocab) + ": a tokenizer needs at least 4 pieces");
  if (how.model_type != "bpe" && how.model_type != "unigram" && how.model_type != "char" && how.model_type != "word")
    return invalid_argument("--model-type '" + how.model_type + "' is not one of bpe, unigram, char, word");
  for (const std::string& f : files) {
    std::ifstream probe(f, std::ios::binary);
    if (!probe) return not_found(f + ": cannot open the text file");
  }
  LineIterator lines(files);
  if (lines.done() && lines.status().ok())
    return invalid_argument("tokenizer: the text files hold no non-empty line: " + files.front() + (files.size() > 1 ? ", ..." : ""));
  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(how.vocab)},
      {"model_type", how.model_type},
      {"character_coverage", "1.0"},
      {"byte_fallback", how.byte_fallback ? "true" : "false"},
      // Text as it is: no Unicode normalisation, whitespace kept, so decoding gives the text back.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      // SentencePiece leaves tabs and carriage returns out of its alphabet (they would decode as the
      // unknown piece): pieces of their own, so indented and CRLF text round-trips too.
      {"user_defined_symbols", "\t,\r"},
      {"input_sentence_size", std::to_string(how.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "65536"},
      {"hard_vocab_limit", "true"},
      {"minloglevel", "2"},  // errors only: not the progress, nor the .vocab listing's warnings about tabs
  };
  auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines);
  if (!lines.status().ok()) return io_error(lines.status().ToString());
  return from_sp(st, "tokenizer training (SentencePiece, --vocab " + std::to_string(how.vocab) + ", " +
                         how.model_type + ")");
}

Expected<Tokenizer> Tokenizer::load(const std::string& model_path) {
  std::ifstream probe(model_path, std::ios::binary);
  if (!probe) return not_found(model_path + ": no tokenizer model there (troupe data tokenize writes one)");
  Tokenizer t;
  t.sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = t.sp_->Load(model_path);
  if (!st.ok()) return invalid_argument(model_path + ": not a SentencePiece model: " + st.ToString());
  if (t.sp_->eos_id() < 0)
    return invalid_argument(model_path + ": the tokenizer has no end-of-sentence piece, which ends every line");
  t.path_ = model_path;
  return t;
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

int Tokenizer::vocab() const { return sp_->GetPieceSize(); }
int Tokenizer::end_of_line() const { return sp_->eos_id(); }

Expected<std::vector<int>> Tokenizer::encode(const std::string& line) const {
  std::vector<int> ids;
  auto st = sp_->Encode(line, &ids);
  if (!st.ok()) return invalid_argument("tokenizer " + path_ + ": " + st.ToString());
  return ids;
}

Expected<std::vector<int>> Tokenizer::encode_lines(const std::string& text) const {
  std::vector<int> out;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    auto ids = encode(text.substr(begin, end - begin));
    if (!ids.ok()) return ids.status();
    out.insert(out.end(), ids->begin(), ids->end());
    out.push_back(end_of_line());
    begin = end + 1;
  }
  return out;
}

Expected<std::string> Tokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  std::vector<int> line;
  auto flush = [&]() -> Status {
    if (line.empty()) return {};
    std::string piece;
    auto st = sp_->Decode(line, &piece);
    if (!st.ok()) return invalid_argument("tokenizer " + path_ + ": " + st.ToString());
    text += piece;
    line.clear();
    return {};
  };
  for (int id : ids) {
    if (id < 0 || id >= vocab()) {
      return invalid_argument("token id " + std::to_string(id) + " is outside the tokenizer's vocabulary [0, " +
                              std::to_string(vocab()) + ") (" + path_ + ")");
    }
    if (id == end_of_line()) {
      TROUPE_RETURN_IF_ERROR(flush());
      text += '\n';
    } else {
      line.push_back(id);
    }
  }
  TROUPE_RETURN_IF_ERROR(flush());
  return text;
}

}  // namespace troupe::data
