// The plain libtorch loop that troupe's torchscript model is measured against (bench/torch_overhead.sh):
// the same TorchScript module on Fashion-MNIST's training split (pixels / 255), batches of `batch` in an
// order shuffled each epoch, cross-entropy, SGD with momentum through torch::optim, one intra-op
// thread. Prints one JSON line per epoch: {"epoch": e, "samples_per_second": ...} (the steps only).
//
//   torch_loop MODULE.pt FASHION_MNIST_DIR EPOCHS BATCH LR MOMENTUM
#include <torch/script.h>
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

std::vector<uint8_t> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "torch_loop: cannot open %s\n", path.c_str());
    std::exit(1);
  }
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: torch_loop MODULE.pt FASHION_MNIST_DIR EPOCHS BATCH LR MOMENTUM\n");
    return 2;
  }
  const std::string dir = argv[2];
  const int epochs = std::atoi(argv[3]);
  const int64_t batch = std::atoll(argv[4]);
  torch::set_num_threads(1);
  torch::manual_seed(1);
  auto module = torch::jit::load(argv[1]);
  module.train();
  const std::vector<uint8_t> images = gunzip(dir + "/train-images-idx3-ubyte.gz");
  const std::vector<uint8_t> labels = gunzip(dir + "/train-labels-idx1-ubyte.gz");
  const int64_t count = static_cast<int64_t>(labels.size()) - 8;
  std::vector<float> x(static_cast<size_t>(count) * 784);
  for (size_t i = 0; i < x.size(); ++i) x[i] = images[16 + i] / 255.0f;
  std::vector<int64_t> y(labels.begin() + 8, labels.end());

  std::vector<torch::Tensor> params;
  for (const auto& p : module.parameters()) params.push_back(p);
  torch::optim::SGD sgd(params, torch::optim::SGDOptions(std::atof(argv[5])).momentum(std::atof(argv[6])));
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(7);
  std::vector<float> xb(static_cast<size_t>(batch) * 784);
  std::vector<int64_t> yb(static_cast<size_t>(batch));
  for (int e = 1; e <= epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    const int64_t steps = count / batch;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t r = 0; r < batch; ++r) {
        const int64_t i = order[static_cast<size_t>(s * batch + r)];
        std::copy_n(x.data() + i * 784, 784, xb.data() + r * 784);
        yb[static_cast<size_t>(r)] = y[static_cast<size_t>(i)];
      }
      const auto input = torch::from_blob(xb.data(), {batch, 1, 28, 28}, torch::kFloat32);
      const auto target = torch::from_blob(yb.data(), {batch}, torch::kInt64);
      sgd.zero_grad();
      torch::nn::functional::cross_entropy(module.forward({input}).toTensor(), target).backward();
      sgd.step();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"epoch\": %d, \"samples_per_second\": %.1f}\n", e, static_cast<double>(steps * batch) / seconds);
    std::fflush(stdout);
  }
  return 0;
}
