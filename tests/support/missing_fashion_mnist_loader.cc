// Link stand-in for the Fashion-MNIST loader while trainers/fashion_mnist.cc (branch `data`) is not
// on this branch: trainers/local_trainer.cc calls load_fashion_mnist, so anything that links
// train_mlp_cpu needs the symbol. tests/trainers and bench compile this file only when the real
// loader is absent (see their CMakeLists.txt); once it is merged this file is unused and can go.
#include "trainers/fashion_mnist.h"

namespace troupe {

Expected<Dataset> load_fashion_mnist(const std::string& dir, Split) {
  return unavailable("load_fashion_mnist(" + dir +
                     "): this build has no Fashion-MNIST loader (trainers/fashion_mnist.cc is not merged yet)");
}

}  // namespace troupe
