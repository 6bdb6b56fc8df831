// A fixed random Markov chain of order 1 or 2 over a small vocabulary, for the language-model
// tests: its token streams (as raw u16 files, or as --seq-len windows in memory) and its entropy
// rate, computed exactly — the lowest mean loss per token any model can reach on its streams —
// and the conditional entropy given the last token only (what a model that cannot look back
// further reaches on an order-2 chain).
#pragma once

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace troupe::testing {

struct MarkovChain2 {
  int vocab = 16;
  std::vector<double> next;  // next[(a * vocab + b) * vocab + c]: the chance of c after a, b

  // Each pair (a, b) is followed by one of `support` tokens, with random probabilities; order 1:
  // the same ones for every a (the chance of c depends on b alone).
  MarkovChain2(int v, int support, uint64_t seed, int order = 2) : vocab(v), next(static_cast<size_t>(v) * v * v, 0.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.2, 1.0);
    for (int ab = 0; ab < vocab * vocab; ++ab) {
      if (order == 1 && ab >= vocab) {  // a > 0: a copy of a = 0's row for the same b
        std::copy_n(next.begin() + (ab % vocab) * vocab, vocab, next.begin() + ab * vocab);
        continue;
      }
      double sum = 0;
      for (int k = 0; k < support; ++k) {
        const int c = static_cast<int>(rng() % vocab);
        const double w = u(rng);
        next[ab * vocab + c] += w;
        sum += w;
      }
      for (int c = 0; c < vocab; ++c) next[ab * vocab + c] /= sum;
    }
  }

  // The stationary distribution over pairs (a, b), by power iteration (the chain mixes fast).
  std::vector<double> stationary() const {
    const int pairs = vocab * vocab;
    std::vector<double> pi(pairs, 1.0 / pairs), nxt(pairs);
    for (int it = 0; it < 5000; ++it) {
      std::fill(nxt.begin(), nxt.end(), 0.0);
      for (int ab = 0; ab < pairs; ++ab)
        for (int c = 0; c < vocab; ++c) nxt[(ab % vocab) * vocab + c] += pi[ab] * next[ab * vocab + c];
      pi.swap(nxt);
    }
    return pi;
  }

  // The entropy rate -sum_ab pi_ab sum_c P(c | ab) log P(c | ab).
  double entropy_rate() const {
    const int pairs = vocab * vocab;
    const std::vector<double> pi = stationary();
    double h = 0;
    for (int ab = 0; ab < pairs; ++ab)
      for (int c = 0; c < vocab; ++c) {
        const double p = next[ab * vocab + c];
        if (p > 0) h -= pi[ab] * p * std::log(p);
      }
    return h;
  }

  // H(c | b): the entropy of the next token given the last one only, P(c | b) = sum_a pi(a | b)
  // P(c | a, b). Equal to the rate for an order-1 chain; above it for order 2.
  double entropy_given_last() const {
    const std::vector<double> pi = stationary();
    double h = 0;
    for (int b = 0; b < vocab; ++b) {
      double mass = 0;
      std::vector<double> p(vocab, 0.0);
      for (int a = 0; a < vocab; ++a) {
        mass += pi[a * vocab + b];
        for (int c = 0; c < vocab; ++c) p[c] += pi[a * vocab + b] * next[(a * vocab + b) * vocab + c];
      }
      for (int c = 0; c < vocab; ++c)
        if (p[c] > 0) h -= p[c] * std::log(p[c] / mass);
    }
    return h;
  }

  // The loss of the chain itself on `ids` cut into windows of `seq` (as --seq-len cuts them): each
  // window's first target sees one token of context only, scored by P(c | b) = sum_a pi(a | b)
  // P(c | a, b); every other by P(c | a, b). The best a windowed model can do on this sample.
  double window_loss(const std::vector<uint16_t>& ids, int64_t seq) const {
    const std::vector<double> pi = stationary();
    double total = 0;
    const int64_t windows = (static_cast<int64_t>(ids.size()) - 1) / seq;
    for (int64_t w = 0; w < windows; ++w)
      for (int64_t t = 0; t < seq; ++t) {
        const int64_t i = w * seq + t;
        const int b = ids[i], c = ids[i + 1];
        double p = 0;
        if (t > 0) {
          p = next[(ids[i - 1] * vocab + b) * vocab + c];
        } else {
          double mass = 0;
          for (int a = 0; a < vocab; ++a) {
            mass += pi[a * vocab + b];
            p += pi[a * vocab + b] * next[(a * vocab + b) * vocab + c];
          }
          p /= mass;
        }
        total -= std::log(p);
      }
    return total / static_cast<double>(windows * seq);
  }

  std::vector<uint16_t> sample(int64_t n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<uint16_t> ids(static_cast<size_t>(n));
    int a = 0, b = 1;
    for (int64_t t = 0; t < n; ++t) {
      const double r = u(rng);
      double acc = 0;
      int c = vocab - 1;
      for (int k = 0; k < vocab; ++k) {
        acc += next[(a * vocab + b) * vocab + k];
        if (r < acc) {
          c = k;
          break;
        }
      }
      ids[static_cast<size_t>(t)] = static_cast<uint16_t>(c);
      a = b;
      b = c;
    }
    return ids;
  }
};

inline void write_u16(const std::string& path, const std::vector<uint16_t>& ids) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
}

// The --seq-len windows of `ids` (as data/token_windows.cc cuts them) over `vocab` classes.
inline Dataset token_window_dataset(const std::vector<uint16_t>& ids, int64_t seq, int vocab) {
  Dataset d;
  d.count = (static_cast<int64_t>(ids.size()) - 1) / seq;
  d.rows = 1;
  d.cols = static_cast<int>(seq);
  d.classes = vocab;
  d.target_width = seq;
  d.schema = {FieldSpec{"tokens", ValueType::f32, ValueType::u16, {seq}, false},
              FieldSpec{"targets", ValueType::i32, ValueType::u16, {seq}, true}};
  for (int64_t t = 0; t < d.count * seq; ++t) {
    d.images.push_back(ids[static_cast<size_t>(t)]);
    d.labels.push_back(ids[static_cast<size_t>(t + 1)]);
  }
  return d;
}

}  // namespace troupe::testing
