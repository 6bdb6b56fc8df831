// A SentencePiece tokenizer (libsentencepiece from Debian): trained on text files, loaded by path,
// encoding a line of text into ids and decoding ids back. Lines are the sentences: encode_lines
// ends every line with the model's end-of-sentence id, and decode turns that id back into '\n',
// so a token stream of many lines decodes to the text it came from. The model is trained without
// normalisation and keeps whitespace as it is, so that round trip is exact for every character
// the training text contained (others become the unknown id, or bytes with byte_fallback).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace troupe::data {

struct TokenizerTraining {
  int vocab = 0;                     // pieces in all, the special ones included (unknown, begin, end)
  std::string model_type = "bpe";    // bpe, unigram, char or word
  bool byte_fallback = false;        // unknown characters as their UTF-8 bytes (needs vocab > 259)
  size_t max_sentences = 1000000;    // lines sampled for training when the text has more
};

// Trains on every line of `files` (empty lines skipped) and writes PREFIX.model and PREFIX.vocab.
// invalid_argument naming the cause when SentencePiece refuses (a vocabulary too small for the
// text's characters, or larger than the text allows), not_found/io_error for unreadable files.
Status train_tokenizer(const std::vector<std::string>& files, const TokenizerTraining& how, const std::string& prefix);

class Tokenizer {
 public:
  static Expected<Tokenizer> load(const std::string& model_path);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  int vocab() const;
  int end_of_line() const;  // the end-of-sentence id that ends every encoded line
  const std::string& path() const { return path_; }

  // One line's ids (no end-of-line id; `line` must not contain '\n').
  Expected<std::vector<int>> encode(const std::string& line) const;
  // Every line of `text`, each followed by end_of_line() (a last line without '\n' too).
  Expected<std::vector<int>> encode_lines(const std::string& text) const;
  // Ids back to text, end_of_line() as '\n'. invalid_argument for an id outside [0, vocab()).
  Expected<std::string> decode(const std::vector<int>& ids) const;

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
};

}  // namespace troupe::data
