// Built-in models too heavy to link into every troupe process. The torchscript model (models/torch/)
// brings libtorch, which costs each process that links it 1-1.7 s to start and 165 MB, so it is
// built as a trainer library beside the binary — <dir of troupe>/../lib/troupe/models/
// libtroupe_model_<name>.so, in the build tree and installed alike — and loaded (as `--lib`
// libraries are, version checked) the first time this process is asked for that trainer.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace troupe {

// Where the bundled model libraries of this process's binary live.
std::string bundled_models_dir();

// The names of the bundled models present, sorted ("torchscript").
std::vector<std::string> bundled_model_names();

// Loads the bundled library of trainer `name` and registers its trainers. not_found when there is
// none of that name; load_trainer_library's errors otherwise (e.g. built against another troupe).
Status load_bundled_model(const std::string& name);

}  // namespace troupe
