// Language-model windows over a token stream (--seq-len T): the stream's ids cut into windows of T,
// window w holding inputs ids[wT, wT + T) (field "tokens") and targets ids[wT + 1, wT + T + 1)
// (field "targets": the next token at every position). Windows do not overlap, so an epoch sees
// every token once as an input; the feeds visit them in a seeded order per epoch. The vocabulary
// (DataSpec::classes) is the largest id + 1 over the training and validation streams.
//
// Ids are fed as f32 inputs (exact: ids stay below 2^20) and i32 targets, kept in memory (8 bytes
// per token), or with --stream read from the files as batches are cut (nothing per token in memory:
// StreamedInputs::windows).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/table.h"
#include "data/dataset.h"
#include "data/data_options.h"

namespace troupe {

// The windows of the stream `tokens` (one integer per example), `vocab` classes; invalid_argument
// naming the stream when it is not integers, holds a negative id or one >= vocab, or is shorter
// than seq_len + 1 tokens.
Expected<Dataset> token_windows(const data::Field& tokens, int64_t seq_len, int vocab, const std::string& where);

// The same windows over field `field` of `table`, read from its files as batches are cut (the
// table shared, not copied). The caller has checked every id against `vocab`.
Expected<Dataset> streamed_token_windows(std::shared_ptr<const data::Table> table, size_t field, int64_t seq_len,
                                         int vocab, const std::string& where);

struct WindowData {
  Dataset train, test;
  std::string description;  // "tokens (u16, 1200000 ids) in windows of 64: 18749 training windows, ..."
};

// The training and evaluation windows: `train`'s stream (its one field, or the one --inputs
// names), evaluated on `val`'s (the same field) when given, else on a seeded --val-fraction of
// the training windows. The vocabulary: the highest id in the streams + 1, at least `min_vocab`
// (the tokenizer's pieces, when the dataset names one: a model must know every id its tokenizer
// can produce, or a prompt with a piece the data never used could not be read).
Expected<WindowData> token_window_data(const data::Table& train, const data::Table* val, const DataOptions& o,
                                       const std::string& val_from, int min_vocab = 0);

}  // namespace troupe
