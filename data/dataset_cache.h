// The decoded Fashion-MNIST splits of this process, shared read-only by whoever asks. A node process
// hosts its job workers as actors: without the cache each worker decoded the gzip files into its
// own copy (188 MB for the training split) — twice at once for two workers on a node, and again for
// every restarted attempt, on the path from a failure to training again. Callers keep the
// shared_ptr and never copy the Dataset: on the dev VM, filling 188 MB of fresh memory alone costs
// ~0.6 s of page faults (a cache whose users copied measured slower than decoding).
//
// An entry is keyed by the directory and the split and remembers the size and modification time
// of both files; a file that changed since is read again. Thread-safe: concurrent callers for the
// same split wait for one load. Failures are not cached (the next call tries again). Entries stay
// for the life of the process (a node: ~220 MB once it ran a Fashion-MNIST job).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/readers/fashion_mnist.h"

namespace troupe {

// The split from the cache, or loaded by load_fashion_mnist (with its errors) and kept.
Expected<std::shared_ptr<const Dataset>> cached_fashion_mnist(const std::string& dir, Split split);

// Entries in the cache now (tests).
size_t dataset_cache_size();

}  // namespace troupe
