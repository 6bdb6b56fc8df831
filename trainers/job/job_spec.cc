#include "trainers/job/job_spec.h"

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <map>
#include <type_traits>
#include <sstream>
#include <thread>

#include "trainers/pipeline/pipeline_options.h"
#include "trainers/sharded/sharded_state.h"

namespace troupe::job {
namespace {

// Text <-> value for the field types of a spec. Parsers return false for text that is not a value.
std::string text(const std::string& v) { return v; }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}
bool parse(const std::string& s, std::string* out) {
  *out = s;
  return true;
}
bool parse(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) return false;
  *out = v;
  return true;
}
bool parse(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return false;
  *out = v;
  return true;
}
std::string join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? std::string(1, sep) : "") + items[i];
  return out;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

struct Field {
  std::function<std::string(const JobSpec&)> get;
  std::function<bool(const std::string&, JobSpec&)> set;
};

// A field of type T reached through `ref` (a pointer into the spec); int and float fields go
// through int64_t and double.
template <class T, class Ref>
Field field(Ref ref) {
  return {[ref](const JobSpec& s) {
            using V = std::conditional_t<std::is_integral<T>::value, int64_t,
                                         std::conditional_t<std::is_floating_point<T>::value, double, T>>;
            return text(static_cast<V>(*ref(const_cast<JobSpec&>(s))));
          },
          [ref](const std::string& v, JobSpec& s) {
            using V = std::conditional_t<std::is_integral<T>::value, int64_t,
                                         std::conditional_t<std::is_floating_point<T>::value, double, T>>;
            V value{};
            if (!parse(v, &value)) return false;
            *ref(s) = static_cast<T>(value);
            return true;
          }};
}

const std::map<std::string, Field>& fields() {
  static const std::map<std::string, Field> table = [] {
    std::map<std::string, Field> f;
    f["name"] = field<std::string>([](JobSpec& s) { return &s.name; });
    f["strategy"] = field<std::string>([](JobSpec& s) { return &s.strategy; });
    f["workers"] = field<int>([](JobSpec& s) { return &s.workers; });
    f["ps"] = field<int>([](JobSpec& s) { return &s.ps; });
    f["staleness"] = field<int>([](JobSpec& s) { return &s.staleness; });
    f["shard_policy"] = field<std::string>([](JobSpec& s) { return &s.shard_policy; });
    f["library"] = field<std::string>([](JobSpec& s) { return &s.library; });
    f["model_file_sum"] = field<std::string>([](JobSpec& s) { return &s.model_file_sum; });
    f["cpus_per_worker"] = field<double>([](JobSpec& s) { return &s.cpus_per_worker; });
    f["gpus_per_worker"] = field<double>([](JobSpec& s) { return &s.gpus_per_worker; });
    f["cpus_per_server"] = field<double>([](JobSpec& s) { return &s.cpus_per_server; });
    f["transport"] = field<std::string>([](JobSpec& s) { return &s.transport; });
    f["checksum_every"] = field<int64_t>([](JobSpec& s) { return &s.checksum_every; });
    f["bucket_bytes"] = field<int64_t>([](JobSpec& s) { return &s.bucket_bytes; });
    f["grad_wire"] = field<std::string>([](JobSpec& s) { return &s.grad_wire; });
    f["shard"] = field<std::string>([](JobSpec& s) { return &s.shard; });
    f["collective_timeout_ms"] = field<int64_t>([](JobSpec& s) { return &s.collective_timeout_ms; });
    f["data_plane"] = field<std::string>([](JobSpec& s) { return &s.data_plane; });
    f["checkpoint_every"] = field<int64_t>([](JobSpec& s) { return &s.checkpoint_every; });
    f["checkpoint_dir"] = field<std::string>([](JobSpec& s) { return &s.checkpoint_dir; });
    f["checkpoint_keep"] = field<int>([](JobSpec& s) { return &s.checkpoint_keep; });
    f["resume_job"] = field<std::string>([](JobSpec& s) { return &s.resume_job; });
    f["resume_step"] = field<int64_t>([](JobSpec& s) { return &s.resume_step; });
    f["stages"] = field<int>([](JobSpec& s) { return &s.stages; });
    f["microbatches"] = field<int>([](JobSpec& s) { return &s.microbatches; });
    f["schedule"] = field<std::string>([](JobSpec& s) { return &s.schedule; });
    f["stage_layers"] = field<std::string>([](JobSpec& s) { return &s.stage_layers; });
    f["max_restarts"] = field<int>([](JobSpec& s) { return &s.max_restarts; });
    f["restart_backoff_ms"] = field<int64_t>([](JobSpec& s) { return &s.restart_backoff_ms; });
    f["restart_on"] = field<std::string>([](JobSpec& s) { return &s.restart_on; });
    f["progress_timeout_ms"] = field<int64_t>([](JobSpec& s) { return &s.progress_timeout_ms; });
    f["elastic"] = field<bool>([](JobSpec& s) { return &s.elastic; });
    f["recovery"] = field<std::string>([](JobSpec& s) { return &s.recovery; });
    f["mirror_every"] = field<int64_t>([](JobSpec& s) { return &s.mirror_every; });
    f["mirror_overlap"] = field<std::string>([](JobSpec& s) { return &s.mirror_overlap; });
    f["model"] = field<std::string>([](JobSpec& s) { return &s.train.model; });
    f["dataset"] = field<std::string>([](JobSpec& s) { return &s.train.dataset; });
    f["dataset_dir"] = field<std::string>([](JobSpec& s) { return &s.train.dataset_dir; });
    f["data"] = field<std::string>([](JobSpec& s) { return &s.train.data; });
    f["val"] = field<std::string>([](JobSpec& s) { return &s.train.val; });
    f["val_fraction"] = field<double>([](JobSpec& s) { return &s.train.val_fraction; });
    f["target"] = field<std::string>([](JobSpec& s) { return &s.train.target; });
    f["token_dtype"] = field<std::string>([](JobSpec& s) { return &s.train.token_dtype; });
    f["seq_len"] = field<int64_t>([](JobSpec& s) { return &s.train.seq_len; });
    f["loss"] = field<std::string>([](JobSpec& s) { return &s.train.loss; });
    f["stream"] = field<bool>([](JobSpec& s) { return &s.train.stream; });
    f["normalize"] = field<std::string>([](JobSpec& s) { return &s.train.normalize; });
    f["init_from"] = field<std::string>([](JobSpec& s) { return &s.train.init_from; });
    f["init_partial"] = field<bool>([](JobSpec& s) { return &s.train.init_partial; });
    f["save_path"] = field<std::string>([](JobSpec& s) { return &s.train.save_path; });
    f["save_dtype"] = {[](const JobSpec& s) { return std::string(dtype_name(s.train.save_dtype)); },
                       [](const std::string& v, JobSpec& s) { return parse_dtype(v, &s.train.save_dtype); }};
    f["inputs"] = {[](const JobSpec& s) { return join(s.train.inputs, ','); },
                   [](const std::string& v, JobSpec& s) {
                     s.train.inputs = split(v, ',');
                     return true;
                   }};
    f["epochs"] = field<int>([](JobSpec& s) { return &s.train.epochs; });
    f["batch_size"] = field<int>([](JobSpec& s) { return &s.train.batch_size; });
    f["last_batch"] = field<std::string>([](JobSpec& s) { return &s.train.last_batch; });
    f["optimizer"] = field<std::string>([](JobSpec& s) { return &s.train.optimizer; });
    f["lr"] = field<float>([](JobSpec& s) { return &s.train.lr; });
    f["lr_scaling"] = field<std::string>([](JobSpec& s) { return &s.train.lr_scaling; });
    f["lr_reference_batch"] = field<int>([](JobSpec& s) { return &s.train.lr_reference_batch; });
    f["warmup_steps"] = field<int64_t>([](JobSpec& s) { return &s.train.warmup_steps; });
    f["accumulate"] = field<int>([](JobSpec& s) { return &s.train.accumulate; });
    f["lr_schedule"] = field<std::string>([](JobSpec& s) { return &s.train.lr_schedule; });
    f["momentum"] = field<float>([](JobSpec& s) { return &s.train.momentum; });
    f["weight_decay"] = field<float>([](JobSpec& s) { return &s.train.weight_decay; });
    f["weight_decay_params"] = field<std::string>([](JobSpec& s) { return &s.train.weight_decay_params; });
    f["clip_grad_norm"] = field<float>([](JobSpec& s) { return &s.train.clip_grad_norm; });
    f["seed"] = field<uint64_t>([](JobSpec& s) { return &s.train.seed; });
    f["max_steps"] = field<int64_t>([](JobSpec& s) { return &s.train.max_steps; });
    f["loss_check_every"] = field<int64_t>([](JobSpec& s) { return &s.train.loss_check_every; });
    f["cpu_threads"] = field<int>([](JobSpec& s) { return &s.train.cpu_threads; });
    f["loss_scale"] = field<float>([](JobSpec& s) { return &s.train.loss_scale; });
    f["loss_scale_interval"] = field<int64_t>([](JobSpec& s) { return &s.train.loss_scale_interval; });
    f["loss_scale_max_skips"] = field<int64_t>([](JobSpec& s) { return &s.train.loss_scale_max_skips; });
    f["precision"] = {[](const JobSpec& s) { return std::string(dtype_name(s.train.precision)); },
                      [](const std::string& v, JobSpec& s) { return parse_dtype(v, &s.train.precision); }};
    // Lists: hidden layer sizes "256,128" and trainer args joined by ';' (an arg holds no ';').
    f["hidden"] = {[](const JobSpec& s) {
                     std::vector<std::string> v;
                     for (int h : s.train.hidden) v.push_back(std::to_string(h));
                     return join(v, ',');
                   },
                   [](const std::string& v, JobSpec& s) {
                     s.train.hidden.clear();
                     for (const std::string& item : split(v, ',')) {
                       int64_t h = 0;
                       if (!parse(item, &h)) return false;
                       s.train.hidden.push_back(static_cast<int>(h));
                     }
                     return true;
                   }};
    f["trainer_args"] = {[](const JobSpec& s) { return join(s.train.trainer_args, ';'); },
                         [](const std::string& v, JobSpec& s) {
                           s.train.trainer_args = split(v, ';');
                           return true;
                         }};
    return f;
  }();
  return table;
}

}  // namespace

// GPU workers (trainers/job/gpu_worker.h): sync, or async (parameter-server workers on GPUs:
// trainers/cuda/cuda_ps_worker.h), the built-in mlp or cnn, one device each (or a share of one), f32, or
// bf16 and (sync, as on CPUs) f16 for the mlp, checkpoints and resume as CPU workers; no elastic
// jobs or --accumulate yet.
static Status validate_gpu_workers(const JobSpec& s) {
  if (s.gpus_per_worker <= 0) return {};
  const std::string g = "--gpus-per-worker: ";
  if (s.gpus_per_worker > 1) return invalid_argument(g + "a worker trains on one GPU; ask for 1 (or a share, 0.5)");
  if (s.strategy != "sync" && s.strategy != "async")
    return invalid_argument(g + "GPU workers run --strategy sync or async for now (" + s.strategy + " trains on CPUs)");
  if ((s.train.model != "mlp" && s.train.model != "cnn") || !s.library.empty())
    return invalid_argument(g + "GPU workers train the built-in mlp or cnn for now (--model " + s.train.model +
                            (s.library.empty() ? "" : " from a --lib library") + ")");
  if (s.train.precision != DType::f32 && s.train.model != "mlp")
    return invalid_argument(g + "GPU workers train the " + s.train.model + " in f32 for now (--precision bf16 and "
                            "f16 are the mlp's)");
  if (s.elastic) return invalid_argument(g + "GPU jobs are not elastic yet: drop --elastic");
  if (s.train.accumulate != 1) return invalid_argument(g + "GPU workers do not take --accumulate yet");
  if (s.strategy == "sync" && s.train.pads_last_batch())
    return invalid_argument(g + "sync GPU workers train whole batches for now: drop --last-batch pad");
  return {};
}

namespace {
// --recovery: one of auto, live, checkpoint; live only where it is built.
Status validate_recovery(const JobSpec& s) {
  if (s.recovery != "auto" && s.recovery != "live" && s.recovery != "checkpoint")
    return invalid_argument("--recovery '" + s.recovery + "' is not one of auto, live, checkpoint");
  if (s.mirror_every < 1)
    return invalid_argument("--mirror-every " + std::to_string(s.mirror_every) + " is not a number of steps >= 1");
  if (s.mirror_overlap != "auto" && s.mirror_overlap != "on" && s.mirror_overlap != "off")
    return invalid_argument("--mirror-overlap '" + s.mirror_overlap + "' is not one of auto, on, off");
  if (s.recovery != "live" || recovers_live(s)) return {};
  const std::string what = s.strategy == "pipeline" && s.workers < 2
                               ? "a pipeline of one worker (nobody survives its loss)"
                           : s.strategy != "sync" && s.strategy != "pipeline" ? "--strategy " + s.strategy
                                                                                : "GPU workers";
  return invalid_argument("--recovery live is built for CPU sync and pipeline jobs only so far, not " + what +
                          ": use --recovery checkpoint (or auto)");
}
}  // namespace

Status validate(const JobSpec& s) {
  if (s.strategy != "sync" && s.strategy != "async" && s.strategy != "central" && s.strategy != "pipeline") {
    return invalid_argument("--strategy '" + s.strategy + "' is not one of sync, async, central, pipeline");
  }
  if (s.workers < 1 || s.workers > 4096) {
    return invalid_argument("--workers must be in [1, 4096] (got " + std::to_string(s.workers) + ")");
  }
  if (s.strategy == "async" && (s.ps < 1 || s.ps > 1024)) {
    return invalid_argument("--strategy async needs --ps N parameter servers, N in [1, 1024] (got " +
                            std::to_string(s.ps) + ")");
  }
  if (s.strategy != "async" && s.ps != 0) {
    return invalid_argument("--ps is for --strategy async (" + s.strategy + " keeps no parameter servers)");
  }
  if (s.staleness < -1) return invalid_argument("--staleness must be >= 0, or -1 for unbounded");
  TROUPE_RETURN_IF_ERROR(validate_gpu_workers(s));
  if (s.cpus_per_worker < 0 || s.gpus_per_worker < 0 || s.cpus_per_server < 0) {
    return invalid_argument("resources per worker and per parameter server must be >= 0");
  }
  if (s.strategy == "pipeline") {
    if (s.stages < 1) return invalid_argument("--strategy pipeline needs --stages K (the model's layers cut into K stages)");
    if (s.train.accumulate != 1)
      return invalid_argument("--accumulate is not for --strategy pipeline: --microbatches already sums micro-batches' "
                              "gradients into one update");
    TROUPE_RETURN_IF_ERROR(pipeline::validate(pipeline_options(s), s.train.batch_size));
  } else if (s.stages != 0) {
    return invalid_argument("--stages is for --strategy pipeline (" + s.strategy + " does not split the model)");
  }
  if (s.strategy == "pipeline" && s.train.precision != DType::f32)
    return invalid_argument("--precision: pipeline stages compute in f32 for now");
  if ((s.strategy == "async" || s.strategy == "central") && s.train.precision == DType::f16) {
    return invalid_argument("--precision f16 needs dynamic loss scaling, which " + s.strategy +
                            " workers do not do yet; use --precision bf16 (f32's range, no scaling)");
  }
  const int parts = s.strategy == "pipeline" ? 1 : s.workers * s.train.accumulate;
  if (s.train.batch_size % parts != 0) {
    return invalid_argument("--batch-size " + std::to_string(s.train.batch_size) + " (the global batch) does not "
                            "divide among " + std::to_string(s.workers) + " workers" +
                            (s.train.accumulate > 1 ? " x " + std::to_string(s.train.accumulate) + " micro-batches" : "") +
                            "; use a multiple of " + std::to_string(parts));
  }
  if (s.transport != "auto" && s.transport != "shm" && s.transport != "tcp" && s.transport != "hierarchical") {
    return invalid_argument("--transport '" + s.transport + "' is not one of auto, shm, tcp, hierarchical");
  }
  if (s.collective_timeout_ms < 1) return invalid_argument("collective_timeout_ms must be >= 1");
  if (s.data_plane != "auto" && s.data_plane != "tls" && s.data_plane != "plain")
    return invalid_argument("--data-plane '" + s.data_plane + "' is not one of auto, tls, plain");
  if (s.bucket_bytes < -1) return invalid_argument("--bucket-bytes must be >= 0, or -1 for auto");
  DType wire = DType::f32;
  if (s.grad_wire != "auto" && !parse_dtype(s.grad_wire, &wire))
    return invalid_argument("--grad-wire '" + s.grad_wire + "' is not one of auto, f32, bf16, f16");
  if (wire != DType::f32 && (s.strategy != "sync" || s.gpus_per_worker > 0))
    return invalid_argument("--grad-wire " + s.grad_wire + " is for sync jobs on CPU workers (their gradient "
                            "all-reduce)");
  if (s.train.pads_last_batch() && (s.strategy == "central" || s.strategy == "pipeline"))
    return invalid_argument("--last-batch pad is for sync jobs (and async ones, whose workers train their short last "
                            "batch anyway); " + s.strategy + " jobs train whole batches for now: drop it");
  if (s.train.last_batch == "drop" && s.strategy == "async")
    return invalid_argument("--last-batch drop: an async job's workers train every example once (their epoch's last "
                            "batch short, no collective waits on it), which its exactly-once accounting checks; "
                            "drop the flag");
  ShardStage stage = ShardStage::none;
  if (!parse_shard_stage(s.shard, &stage))
    return invalid_argument("--shard '" + s.shard + "' is not one of none, optimizer, gradients, parameters");
  if (stage != ShardStage::none && (s.strategy != "sync" || s.gpus_per_worker > 0))
    return invalid_argument("--shard " + s.shard + " is for sync jobs on CPU workers (got --strategy " + s.strategy +
                            (s.gpus_per_worker > 0 ? " with --gpus-per-worker" : "") + ")");
  if ((stage == ShardStage::gradients || stage == ShardStage::parameters) && s.train.accumulate > 1)
    return invalid_argument("--shard " + s.shard + " with --accumulate " + std::to_string(s.train.accumulate) +
                            " would hold every micro-batch's full gradient; use --shard optimizer with --accumulate");
  if (s.checkpoint_every < 0) return invalid_argument("--checkpoint-every must be >= 0 (0: no checkpoints)");
  if (s.checkpoint_every > 0 && s.checkpoint_dir.empty()) {
    return invalid_argument("--checkpoint-every needs --checkpoint-dir DIR (a directory every worker can write)");
  }
  if (s.checkpoint_keep < 1) return invalid_argument("--checkpoint-keep must be >= 1");
  if (s.max_restarts < 0 || s.max_restarts > 1000) {
    return invalid_argument("--max-restarts must be in [0, 1000] (got " + std::to_string(s.max_restarts) + ")");
  }
  if (s.restart_backoff_ms < 0 || s.restart_backoff_ms > 600000) {
    return invalid_argument("--restart-backoff must be in [0, 600000] ms (got " + std::to_string(s.restart_backoff_ms) + ")");
  }
  if (s.progress_timeout_ms < 0) return invalid_argument("--progress-timeout must be >= 0 (0: never)");
  if (s.restart_on != "any" && s.restart_on != "same" && s.restart_on != "other")
    return invalid_argument("--restart-on '" + s.restart_on + "' is not one of any, same, other");
  if (s.elastic && s.strategy != "sync") {
    return invalid_argument("--elastic is for --strategy sync (got " + s.strategy + "); an async job already goes "
                            "on while a failed actor is replaced");
  }
  if (!s.resume_job.empty() && s.resume_step < 1) return invalid_argument("resume_step must be >= 1");
  TROUPE_RETURN_IF_ERROR(validate_recovery(s));
  for (const std::string& a : s.train.trainer_args) {
    if (a.find(';') != std::string::npos) return invalid_argument("--trainer-arg '" + a + "' may not contain ';'");
  }
  return s.train.validate();
}

bool recovers_live(const JobSpec& s) {
  // A pipeline: a lost stage from another replica's, or (one replica) from its buddy stage's mirror.
  const bool pipeline = s.strategy == "pipeline" && s.workers >= 2;
  // Elastic: the survivors go on at the smaller size from their memory, and grow back the same way
  // (--shard: the shares and their buddies' copies re-cut for the new size, mirror_recut.h).
  return s.recovery != "checkpoint" && (s.strategy == "sync" || pipeline) && s.gpus_per_worker <= 0;
}

pipeline::PipelineOptions pipeline_options(const JobSpec& s) {
  pipeline::PipelineOptions p;
  p.stages = s.stages;
  p.microbatches = s.microbatches;
  p.schedule = s.schedule;
  p.stage_layers = s.stage_layers;
  p.workers = s.workers;
  return p;
}

DType effective_grad_wire(const JobSpec& spec, const std::string& transport) {
  DType wire = DType::f32;
  if (spec.grad_wire == "auto") {
    // Sharded jobs reduce in f32 unless told (--reduce-dtype): their reduce-scatters are the
    // only copy of each chunk's gradient, never all-reduced again.
    const bool sharded = !spec.shard.empty() && spec.shard != "none";
    const bool sockets = transport != "shm" && transport != "inproc";
    return spec.gpus_per_worker > 0 || !sockets || sharded ? DType::f32 : spec.train.precision;
  }
  parse_dtype(spec.grad_wire, &wire);  // validated
  return wire;
}

bool mirror_overlaps(const JobSpec& spec) {
  if (spec.mirror_overlap != "auto") return spec.mirror_overlap == "on";
  return std::thread::hardware_concurrency() >= 2u * static_cast<unsigned>(spec.workers);
}

int64_t effective_bucket_bytes(const JobSpec& spec) {
  if (spec.bucket_bytes >= 0) return spec.bucket_bytes;
  if (spec.shard == "gradients") return int64_t{256} << 10;
  return std::thread::hardware_concurrency() >= 2u * static_cast<unsigned>(spec.workers) ? int64_t{256} << 10 : 0;
}

std::vector<std::string> to_settings(const JobSpec& spec) {
  std::vector<std::string> out;
  for (const auto& [key, f] : fields()) out.push_back(key + "=" + f.get(spec));
  return out;
}

Expected<JobSpec> from_settings(const std::vector<std::string>& settings) {
  JobSpec spec;
  for (const std::string& item : settings) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return corrupt_data("job setting '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    auto f = fields().find(key);
    if (f == fields().end()) {
      return corrupt_data("job setting '" + key + "' is not known to this troupe (submitted by a newer one?)");
    }
    if (!f->second.set(item.substr(eq + 1), spec)) {
      return corrupt_data("job setting '" + item + "': the value does not parse");
    }
  }
  return spec;
}

Expected<std::shared_ptr<const tls::TlsContext>> data_plane_tls(const JobSpec& spec) {
  if (spec.data_plane == "plain") return std::shared_ptr<const tls::TlsContext>();
  auto cluster = tls::process_tls();
  if (!cluster.ok()) return cluster.status().with_context("the data plane's TLS");
  if (!*cluster && spec.data_plane == "tls")
    return invalid_argument("the job asks for a TLS data plane (--data-plane tls), but the cluster runs without TLS "
                            "(start it with `troupe up --tls`)");
  return *cluster;
}

}  // namespace troupe::job
