// The GPT's shape (`--model gpt --trainer-arg key=value`), read from the job's settings and the
// data, each bad value refused naming the flag:
//   layers   transformer blocks (default 2)
//   heads    attention heads; must divide dim (default 2)
//   dim      the residual stream's width (default 64)
//   context  the learned position table's length (default: the data's --seq-len); a window longer
//            than it is refused
//   vocab    the token table's rows (default: the data's vocabulary, its largest id + 1 over the
//            training and validation streams); larger values leave room for ids the data lacks
//            (256 for bytes), smaller ones than the data's are refused
//   tie      1: the language-model head is the token embedding (tied), 0: its own matrix (default)
#pragma once

#include <cstdint>
#include <string>

#include "trainers/api/trainer.h"

namespace troupe::models {

struct GptConfig {
  int64_t layers = 2, heads = 2, dim = 64, context = 0, vocab = 0;
  bool tie = false;

  int64_t head_dim() const { return dim / heads; }
  // "L2 H2 D64 T32 V16 tied": what describe() and the saved model's metadata show.
  std::string describe() const;
  // The configuration of a job over token windows of `seq_len` ids whose vocabulary is
  // `data_vocab`; invalid_argument naming the --trainer-arg or flag that is wrong.
  static Expected<GptConfig> from(const JobConfig& config, int64_t seq_len, int64_t data_vocab);
  // The configuration describe() gave, or a saved model's troupe.description ("gpt " + it); invalid_argument
  // naming the text when it is not one.
  static Expected<GptConfig> parse(const std::string& description);
};

}  // namespace troupe::models
