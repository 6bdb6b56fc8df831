// `troupe data tokenize`: trains a SentencePiece tokenizer (data/tokenizer.h) on text files and
// writes them as token shards a job reads with `--data DIR --seq-len T`:
//   DIR/tokenizer.model, DIR/tokenizer.vocab   the tokenizer (jobs and generation use it by path)
//   DIR/train.bin [, DIR/val.bin, DIR/test.bin] raw little-endian u16 ids (u32 above 65,536 pieces),
//                                               every line ended by the tokenizer's end-of-line id
//   DIR/dataset.yaml                            splits, token_dtype and tokenizer, for --data DIR
// A file whose name carries a split word (val.txt, wiki.test.txt) goes to that split, the others
// to train; --val-fraction F moves the last F of train's lines to val instead.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/tokenizer.h"

namespace troupe::data {

struct TokenizeOptions {
  TokenizerTraining training;
  double val_fraction = 0;  // of train's lines, from its end; 0 = none
};

struct TokenizeReport {
  int vocab = 0;
  std::string token_dtype;                 // u16 or u32
  std::map<std::string, size_t> tokens;    // per split
  std::map<std::string, size_t> lines;     // per split
  std::string model, yaml;                 // paths written
};

Expected<TokenizeReport> tokenize_files(const std::vector<std::string>& files, const TokenizeOptions& options,
                                        const std::string& out_dir);

}  // namespace troupe::data
