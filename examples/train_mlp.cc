// Example: train the Fashion-MNIST MLP from C++ with troupe's one-device strategy.
//
// The same job as `troupe train`, through the library: fill TrainOptions, call train_local with a
// progress callback, read the TrainResult. Errors come back as values (Expected<T>), never as
// exceptions, and their messages say what to do.
//
//   build/bin/example_train_mlp                 # 3 epochs on the CPU
//   build/bin/example_train_mlp cuda 10         # 10 epochs on GPU 0
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainers/local/local_trainer.h"

int main(int argc, char** argv) {
  troupe::TrainOptions options;  // defaults: MLP 784-256-128-10, Adam 0.002, cosine decay, batch 128
  options.epochs = argc > 2 ? std::atoi(argv[2]) : 3;
  options.dataset_dir = "/usr/share/datasets/fashion-mnist";  // Debian's dataset-fashion-mnist
  if (argc > 1) {
    auto device = troupe::parse_device(argv[1]);
    if (!device.ok()) {
      std::fprintf(stderr, "%s\n", device.status().to_string().c_str());
      return 2;
    }
    options.device = *device;
  }
  if (const char* steps = std::getenv("EXAMPLE_MAX_STEPS")) options.max_steps = std::atoll(steps);

  // Called after every step (CPU) or every chunk of steps (GPU), and once at the end of each epoch.
  auto on_progress = [](const troupe::TrainProgress& p) {
    if (p.epoch_done) {
      std::printf("epoch %d/%d  loss %.4f  test accuracy %.4f\n", p.epoch, p.epochs, p.last_epoch.train_loss,
                  p.last_epoch.test_accuracy);
    }
  };

  troupe::Expected<troupe::TrainResult> result = troupe::train_local(options, on_progress);
  if (!result.ok()) {
    std::fprintf(stderr, "training failed: %s\n", result.status().to_string().c_str());
    return 1;
  }
  std::printf("%s on %s: test accuracy %.4f after %d epochs, %.0f samples/s\n", result->model.c_str(),
              result->device.c_str(), result->test_accuracy, result->epochs, result->samples_per_second);
  return 0;
}
