// WebDataset shards: tar files (any compression libarchive reads) whose members sharing a key —
// the member's path up to the first dot of its file name — form one example, read in order.
// Each extension is a field named after it, decoded by its last suffix ("feat.npy" as .npy):
//   .png .jpg .jpeg  decoded (data/readers/png_decoder.h, jpeg_decoder.h) into u8[H,W,C];
//   .cls             an integer class written as text ("3");
//   .txt             a text label, mapped to classes in sorted order (names kept with the field);
//   .npy             an array (data/readers/npy_reader.h).
// Other extensions (.json metadata, ...) are not read. Every example must hold the fields of the
// first one with the same per-example type and shape: an example without its label, an image of
// another size or a corrupt PNG is refused naming the shard and the member or key.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "data/table.h"

namespace troupe::data {

// The examples of `shards`, concatenated in order.
Expected<Table> read_webdataset(const std::vector<std::string>& shards);

bool looks_like_tar(const std::string& path);  // .tar, .tar.gz, .tgz, .tar.xz, .tar.zst

}  // namespace troupe::data
