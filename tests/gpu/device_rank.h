// One rank of a device-collective group in its own process, for the multi-process GPU tests
// (collectives_device_multiprocess_test.cc): troupe_gpu_tests re-runs itself as
//
//   troupe_gpu_tests --device-rank --redis-port P --password W --prefix X --group G --rank R --world N
//                    --path staged|nccl|host [--device D] [--count 4194304] [--timeout-ms 20000]
//                    [--iterations K]
//
// Forms the group through a real RedisStore (staged: form_group over the host transport, every rank
// on one node so shared memory, then make_staged_communicator; nccl: form_nccl_group), all-reduces
// `count` floats of value rank + 1 on the device and reports on stdout, one line each (host: the host
// all-reduce alone on host memory, the staged path's baseline):
//
//   formed <path>            the device communicator is ready ("staged(shm)", "nccl")
//   time <us>                with --iterations K: median of K more all-reduces, after 3 warm-ups
//   ok <sum>                 the all-reduce returned and every element equals <sum>
//   error <code>: <message>  forming or the all-reduce failed (exit code 1)
#pragma once

namespace troupe::test {

// True when argv asks for a device rank (argv[1] is "--device-rank").
bool is_device_rank(int argc, char** argv);
// Runs the rank; the process's exit code.
int device_rank_main(int argc, char** argv);

}  // namespace troupe::test
