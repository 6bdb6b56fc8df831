// Test helpers: run one function per rank on threads over an in-process group, and the inputs and
// references the collective tests compare with.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/inproc_transport.h"
#include "collectives/tcp_transport.h"
#include "core/dtype.h"

namespace troupe::collectives::testing {

using RankFn = std::function<Status(Communicator&)>;

// Runs fn(communicator of rank r) on one thread per rank; returns each rank's Status.
inline std::vector<Status> run_ranks(std::vector<std::unique_ptr<Transport>> transports, const RankFn& fn) {
  const size_t n = transports.size();
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Communicator comm(std::move(transports[r]));
      status[r] = fn(comm);
    });
  for (auto& t : threads) t.join();
  return status;
}

inline std::vector<Status> run_inproc(int size, const RankFn& fn) { return run_ranks(make_inproc_group(size), fn); }

// Runs fn on one thread per rank over the transport connect(rank) returns on that thread (so ranks
// can connect to each other concurrently); a rank whose connect fails reports that error.
using ConnectFn = std::function<Expected<std::unique_ptr<Transport>>(int rank)>;
inline std::vector<Status> run_connected(int size, const ConnectFn& connect, const RankFn& fn) {
  std::vector<Status> status(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      auto transport = connect(r);
      if (!transport) {
        status[r] = transport.status();
        return;
      }
      Communicator comm(std::move(*transport));
      status[r] = fn(comm);
    });
  for (auto& t : threads) t.join();
  return status;
}

// One listener per rank on 127.0.0.1 (kernel-chosen ports) and the addresses to publish.
struct LoopbackListeners {
  std::vector<TcpListener> listeners;
  std::vector<std::string> addresses;

  explicit LoopbackListeners(int size) {
    for (int r = 0; r < size; ++r) {
      auto l = TcpListener::open("127.0.0.1");
      if (!l) throw std::runtime_error("cannot listen on 127.0.0.1: " + l.status().to_string());
      addresses.push_back("127.0.0.1:" + std::to_string(l->port()));
      listeners.push_back(std::move(*l));
    }
  }
  // Rank r's mesh; each rank's listener may be taken once.
  Expected<std::unique_ptr<Transport>> connect(int r, TcpGroupOptions options = {}) {
    return connect_tcp_group(r, std::move(listeners[r]), addresses, options);
  }
};

// Multiples of 1/4 in [-1.25, 1.25]: sums of up to 8 of them are exact in f16 and bf16 (at most 6
// significant bits), so sums must match the reference exactly whatever the order of accumulation.
inline float input_value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3) % 11) - 5) * 0.25f;
}

inline std::vector<char> to_bytes(const std::vector<float>& v, DType dtype) {
  std::vector<char> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      uint16_t h = dtype == DType::f16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline std::vector<float> to_floats(const std::vector<char>& b, DType dtype) {
  std::vector<float> out(b.size() / dtype_size(dtype));
  for (size_t i = 0; i < out.size(); ++i) {
    if (dtype == DType::f32) {
      std::memcpy(&out[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      out[i] = dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

// Value after a round trip through `dtype` storage.
inline float stored(float x, DType dtype) {
  if (dtype == DType::f16) return f16_to_f32(f32_to_f16(x));
  if (dtype == DType::bf16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

}  // namespace troupe::collectives::testing
