// A node process's own figures (gcs/node_stats.h): measured from /proc/self, written to and read
// back from the GCS, a malformed entry skipped and counted rather than failing the reader.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include "gcs/in_memory_store.h"
#include "gcs/node_stats.h"

using namespace troupe;

TEST_CASE("node stats: this process's CPU time, memory, descriptors, sockets and threads", "[gcs][node_stats]") {
  auto before = gcs::measure_this_process("aa");
  REQUIRE(before.ok());
  CHECK(before->node == "aa");
  CHECK(before->rss_bytes > 1 << 20);
  CHECK(before->open_fds >= 3);  // stdin, stdout, stderr at least
  CHECK(before->threads >= 1);
  CHECK(before->time_ms > 0);
  // Two more sockets and a busy thread show.
  int pair[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
  volatile double sink = 0;
  // Busy until the thread itself has run 0.3 s of CPU (not 0.3 s of wall time: on a loaded host a
  // thread may get a fraction of a core), within a 20 s deadline.
  std::thread busy([&] {
    auto thread_cpu = [] {
      timespec t{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
    };
    const double start = thread_cpu();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (thread_cpu() - start < 0.3 && std::chrono::steady_clock::now() < deadline)
      for (int i = 0; i < 10000; ++i) sink = sink + 1;
  });
  auto during = gcs::measure_this_process("aa");
  busy.join();
  auto after = gcs::measure_this_process("aa");
  REQUIRE(during.ok());
  REQUIRE(after.ok());
  CHECK(during->sockets == before->sockets + 2);
  CHECK(during->open_fds == before->open_fds + 2);
  CHECK(during->threads >= before->threads + 1);
  CHECK(after->cpu_seconds >= before->cpu_seconds + 0.2);
  ::close(pair[0]);
  ::close(pair[1]);
}

TEST_CASE("node stats: published per node and listed back, a malformed entry skipped and counted",
          "[gcs][node_stats]") {
  gcs::InMemoryStore store;
  gcs::NodeProcessStats a{"aa", 1000, 1.5, 123456, 17, 4, 9};
  gcs::NodeProcessStats b{"bb", 2000, 0.25, 654321, 12, 2, 5};
  REQUIRE(gcs::put_node_stats(store, a).ok());
  REQUIRE(gcs::put_node_stats(store, b).ok());
  b.rss_bytes = 700000;  // newer figures replace the older
  REQUIRE(gcs::put_node_stats(store, b).ok());
  REQUIRE(store.put(gcs::kNodeStatsTable, "cc", "not msgpack").ok());
  int unreadable = 0;
  auto all = gcs::list_node_stats(store, &unreadable);
  REQUIRE(all.ok());
  CHECK(unreadable == 1);
  REQUIRE(all->size() == 2);
  for (const gcs::NodeProcessStats& s : *all) {
    if (s.node == "aa") {
      CHECK(s.cpu_seconds == 1.5);
      CHECK(s.rss_bytes == 123456);
      CHECK(s.open_fds == 17);
      CHECK(s.sockets == 4);
      CHECK(s.threads == 9);
    } else {
      CHECK(s.node == "bb");
      CHECK(s.rss_bytes == 700000);
    }
  }
  gcs::NodeProcessStats out;
  CHECK(gcs::decode_node_stats("\\x01", &out).code() == Code::corrupt_data);
}
