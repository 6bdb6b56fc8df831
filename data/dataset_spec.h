// What `--data SPEC` names, opened: a dataset as named splits of Tables (data/table.h).
//
// SPEC is one of
//   - a file: .npy (one field), .npz (a field per member), .csv (features + the label column),
//     an IDX file (*-idxN-ubyte[.gz]), a raw token stream (.bin, --token-dtype), WebDataset tar
//     shards (.tar[.gz|.xz|.zst]: a field per member extension, shards of a split read together),
//     HDF5 files (.h5 .hdf5: a field per numeric dataset, by path; a yaml's datasets: names them);
//   - text:FILE (or text:GLOB): any file's bytes as a u8 token stream, field `tokens` (byte-level
//     language models: no tokenizer, a vocabulary of 256);
//   - several files separated by commas, or a glob (data/*.npy);
//   - a directory: its dataset.yaml if it has one, else every file of those kinds in it;
//   - a dataset.yaml (or .yml): { splits: { train: [files or globs], val: [...] },
//     fields: { stem: new_name }, target: name, token_dtype: u16, datasets: [hdf5 names],
//     tokenizer: tokenizer.model } — paths relative to the yaml (troupe data tokenize writes one).
// Without a yaml, a file or array name holding the word train, val/valid/validation or test/t10k
// (as in x_train.npy, y_test.npy, train.bin, t10k-images-idx3-ubyte.gz) belongs to that split and
// its field is the rest of the name (x, y, tokens; IDX "images"/"labels" become image/label);
// names without one are the split "train". Each split's fields must agree in length.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/table.h"

namespace troupe::data {

struct SpecOptions {
  std::string target;              // CSV: the label column (empty: label, labels, y, target, class or cls)
  std::string token_dtype = "u16"; // raw .bin token files
  std::vector<std::string> hdf5_datasets;  // HDF5: the datasets to read (a yaml's datasets:); empty: all
};

struct OpenedDataset {
  std::map<std::string, Table> splits;  // "train", "val", "test", or a yaml's own names
  std::vector<std::string> files;       // every file read, in order
  std::string target;                   // a yaml's default target ("" when none)
  std::string tokenizer;                // a yaml's tokenizer model, absolute ("" when none)
};

Expected<OpenedDataset> open_dataset(const std::string& spec, const SpecOptions& options = {});

// The tokenizer model the dataset.yaml of `spec` names (a yaml, or a directory holding one), made
// absolute; "" for any other spec or a yaml naming none. Reads only the yaml.
Expected<std::string> tokenizer_of(const std::string& spec);

// The spec with every comma-separated path made absolute against the current directory ("" stays).
std::string absolute_spec(const std::string& spec);

// The split name a file or array name carries ("" when none) and the name without it.
struct SplitName {
  std::string split, rest;
};
SplitName split_of(const std::string& name);
// The same for a file: split_of its name without folder and extension (.gz and tar suffixes too).
SplitName split_of_file(const std::string& path);

}  // namespace troupe::data
