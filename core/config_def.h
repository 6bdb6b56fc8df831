// Every runtime setting of troupe, declared once: TROUPE_SETTING(type, name, default, doc).
// Types are std::string, int64_t, double or bool. A setting is overridden by the environment variable
// TROUPE_<NAME> (upper case) and then by `--set name=value` on the command line; `troupe config`
// prints this table. Include this file only with TROUPE_SETTING defined.
//
// clang-format off
TROUPE_SETTING(std::string, log_level, "info", "Level of the per-process log file: trace, debug, info, warn, error or off.")
TROUPE_SETTING(std::string, console_log_level, "warn", "Level of log lines echoed to stderr: trace, debug, info, warn, error or off.")
TROUPE_SETTING(std::string, log_dir, "/tmp/troupe/logs", "Directory holding one log file per process, named <process>-<pid>.log.")
TROUPE_SETTING(std::string, dataset_dir, TROUPE_DEFAULT_DATASET_DIR, "Directory of the Fashion-MNIST IDX files (*-idx?-ubyte.gz); Debian package dataset-fashion-mnist.")
TROUPE_SETTING(bool, blas_autotune, true, "At start, switch OpenBLAS to AVX-512 (or AVX2) kernels when it fell back to older ones on a CPU it does not recognise; never overrides OPENBLAS_CORETYPE. Read from TROUPE_BLAS_AUTOTUNE only, before flags are parsed.")
TROUPE_SETTING(int64_t, cpu_threads, 1, "BLAS threads per CPU worker; 1 keeps workers on one core each.")
TROUPE_SETTING(int64_t, loss_check_every, 1, "Steps between checks that the training loss is finite (a NaN or infinity stops the job naming the step).")
TROUPE_SETTING(int64_t, progress_interval_ms, 200, "Milliseconds between redraws of progress bars.")
TROUPE_SETTING(bool, progress, true, "Draw progress bars on stderr when it is a terminal.")
TROUPE_SETTING(bool, cuda_graphs, true, "Capture each GPU training step in a CUDA graph when shapes are static.")
TROUPE_SETTING(bool, cuda_tf32, false, "Let cuDNN convolutions on GPUs (the cnn) use TF32 tensor cores: faster, but each product keeps about 10 mantissa bits; off keeps strict f32, as the CPU computes.")
TROUPE_SETTING(int64_t, heartbeat_period_ms, 200, "Milliseconds between a node's heartbeats to the head (and between the head's liveness checks); must be below node_suspect_after_ms.")
TROUPE_SETTING(int64_t, node_suspect_after_ms, 800, "A node silent this many milliseconds is SUSPECT: no new actors are placed on it; a heartbeat makes it ALIVE again.")
TROUPE_SETTING(int64_t, node_dead_after_ms, 2000, "A node silent this many milliseconds is DEAD (final): its actors are marked dead. Must exceed node_suspect_after_ms.")
TROUPE_SETTING(int64_t, outage_grace_ms, 60000, "How long nodes, job workers and `troupe submit`'s follower wait out a head or GCS (redis-server) that does not answer before they give up: nodes keep their actors meanwhile and heartbeat on, workers' GCS calls reconnect and go on. The head answers heartbeats from memory, so a GCS outage never costs a node.")
TROUPE_SETTING(int64_t, ended_actors_kept, 1000, "Records of ended actors (FINISHED or DEAD) the GCS keeps for `troupe status` and the dashboard, the newest first; the head removes older ones every 10 s. 0 keeps every record.")
TROUPE_SETTING(std::string, scheduler_policy, "spread", "Actor placement: spread (least-loaded node first, round-robin among equals) or pack (most-loaded node that fits, leaving whole nodes free).")
TROUPE_SETTING(int64_t, dashboard_port, 0, "Port of the head's web dashboard and JSON API (docs/dashboard.md), on the head's bind address: 0 picks a free one (`troupe up` prints it), -1 turns the dashboard off.")
TROUPE_SETTING(int64_t, dashboard_stream_interval_ms, 1000, "Milliseconds between two cluster documents on the dashboard's live stream (/api/stream); an event (a node died, an actor exited) pushes one at once.")
TROUPE_SETTING(int64_t, dashboard_max_streams, 8, "Live streams (/api/stream) the dashboard serves at once; one more is refused with 503.")
// clang-format on
