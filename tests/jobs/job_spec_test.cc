// The job spec as it travels through the GCS: every field survives the round trip, bad records are
// refused naming the item, and a job users cannot run is refused with the reason before it starts.
#include <catch2/catch.hpp>

#include "trainers/job/job_spec.h"

using namespace troupe;
using namespace troupe::job;

TEST_CASE("job spec: every setting survives the trip through the job record", "[jobs][spec]") {
  JobSpec s;
  s.name = "nightly";
  s.strategy = "async";
  s.workers = 6;
  s.ps = 2;
  s.staleness = 3;
  s.shard_policy = "interleaved";
  s.library = "0123456789abcdef";
  s.model_file_sum = "fedcba9876543210";
  s.cpus_per_worker = 0.5;
  s.transport = "tcp";
  s.checksum_every = 7;
  s.checkpoint_every = 100;
  s.checkpoint_dir = "/shared/ckpt";
  s.checkpoint_keep = 5;
  s.resume_job = "00112233445566778899aabbccddeeff";
  s.resume_step = 300;
  s.train.model = "logreg";
  s.train.hidden = {64, 32};
  s.train.trainer_args = {"hidden=12,4", "dropout=0.1"};
  s.train.epochs = 3;
  s.train.batch_size = 96;
  s.train.optimizer = "sgd";
  s.train.lr = 0.0125f;
  s.train.lr_scaling = "linear";
  s.train.warmup_steps = 40;
  s.train.seed = 1234567890123ull;
  s.train.weight_decay = 1e-4f;
  s.train.precision = DType::bf16;
  s.train.loss_scale = 1024.0f;
  s.train.loss_scale_interval = 500;
  s.train.loss_scale_max_skips = 7;
  s.grad_wire = "f16";
  auto back = from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->name == "nightly");
  CHECK(back->strategy == "async");
  CHECK(back->workers == 6);
  CHECK(back->ps == 2);
  CHECK(back->staleness == 3);
  CHECK(back->shard_policy == "interleaved");
  CHECK(back->library == s.library);
  CHECK(back->model_file_sum == s.model_file_sum);
  CHECK(back->cpus_per_worker == 0.5);
  CHECK(back->transport == "tcp");
  CHECK(back->checksum_every == 7);
  CHECK(back->checkpoint_every == 100);
  CHECK(back->checkpoint_dir == "/shared/ckpt");
  CHECK(back->checkpoint_keep == 5);
  CHECK(back->resume_job == s.resume_job);
  CHECK(back->resume_step == 300);
  CHECK(back->train.model == "logreg");
  CHECK(back->train.hidden == std::vector<int>{64, 32});
  CHECK(back->train.trainer_args == s.train.trainer_args);
  CHECK(back->train.epochs == 3);
  CHECK(back->train.batch_size == 96);
  CHECK(back->train.optimizer == "sgd");
  CHECK(back->train.lr == s.train.lr);  // bit for bit: floats are written with 17 digits
  CHECK(back->train.lr_scaling == "linear");
  CHECK(back->train.warmup_steps == 40);
  CHECK(back->train.seed == s.train.seed);
  CHECK(back->train.weight_decay == s.train.weight_decay);
  CHECK(back->train.precision == DType::bf16);
  CHECK(back->train.loss_scale == 1024.0f);
  CHECK(back->train.loss_scale_interval == 500);
  CHECK(back->train.loss_scale_max_skips == 7);
  CHECK(back->grad_wire == "f16");
}

TEST_CASE("job spec: malformed or unknown settings are refused naming the item", "[jobs][spec][errors]") {
  auto no_eq = from_settings({"workers"});
  CHECK(no_eq.status().code() == Code::corrupt_data);
  CHECK(no_eq.status().message().find("'workers' is not key=value") != std::string::npos);
  auto bad_number = from_settings({"workers=four"});
  CHECK(bad_number.status().code() == Code::corrupt_data);
  CHECK(bad_number.status().message().find("workers=four") != std::string::npos);
  auto unknown = from_settings({"flux_capacitor=1"});
  CHECK(unknown.status().code() == Code::corrupt_data);
  CHECK(unknown.status().message().find("flux_capacitor") != std::string::npos);
}

TEST_CASE("job spec: jobs that cannot run are refused with the reason", "[jobs][spec][errors]") {
  JobSpec s;
  s.workers = 3;
  s.train.batch_size = 128;
  Status st = validate(s);
  CHECK(st.code() == Code::invalid_argument);
  CHECK(st.message().find("--batch-size 128 (the global batch) does not divide among 3 workers; use a multiple of 3") !=
        std::string::npos);

  s = JobSpec{};
  s.strategy = "async";
  CHECK(validate(s).message().find("--strategy async needs --ps N") != std::string::npos);
  s.ps = 2;
  CHECK(validate(s).ok());
  s.train.accumulate = 4;  // CPU parameter-server workers accumulate micro-batches as replicas do
  CHECK(validate(s).ok());
  s.workers = 2;
  s.train.batch_size = 36;
  CHECK(validate(s).message().find("does not divide among 2 workers x 4 micro-batches; use a multiple of 8") !=
        std::string::npos);
  s.workers = 1;
  s.train.batch_size = 128;
  s.train.accumulate = 1;
  s.strategy = "sync";
  CHECK(validate(s).message().find("--ps is for --strategy async") != std::string::npos);

  s = JobSpec{};
  s.strategy = "gossip";
  CHECK(validate(s).message().find("'gossip' is not one of sync, async, central") != std::string::npos);

  // GPU workers (trainers/job/gpu_worker.h): sync and async MLP jobs in f32, one GPU (or a share)
  // each; what the first version cannot do is refused naming the flag to drop.
  s = JobSpec{};
  s.gpus_per_worker = 1;
  CHECK(validate(s).ok());
  s.gpus_per_worker = 0.5;
  CHECK(validate(s).ok());  // two workers sharing a GPU: the staged path
  s.gpus_per_worker = 2;
  CHECK(validate(s).message().find("a worker trains on one GPU") != std::string::npos);
  s.gpus_per_worker = 1;
  s.checkpoint_every = 100;
  s.checkpoint_dir = "/tmp/ckpt";
  CHECK(validate(s).ok());  // sync GPU workers checkpoint as CPU ones do (the same files)
  s.resume_job = "0123456789abcdef0123456789abcdef";
  s.resume_step = 100;
  CHECK(validate(s).ok());
  s.resume_job.clear();
  s.resume_step = 0;
  s.strategy = "async";  // async GPU workers take part in checkpoints as CPU ones do (replays)
  s.ps = 2;
  CHECK(validate(s).ok());
  s.checkpoint_every = 0;
  s.gpus_per_worker = 0.5;
  CHECK(validate(s).ok());
  s.train.accumulate = 2;
  s.train.batch_size = 64;
  CHECK(validate(s).message().find("GPU workers do not take --accumulate yet") != std::string::npos);
  s = JobSpec{};
  s.gpus_per_worker = 1;
  s.train.precision = DType::bf16;
  CHECK(validate(s).ok());  // the mlp in bf16 on GPUs
  s.train.precision = DType::f16;
  CHECK(validate(s).ok());  // sync: the loss scaled on the device
  s.strategy = "async";
  s.ps = 1;
  CHECK(validate(s).message().find("--precision f16 needs dynamic loss scaling, which async workers") !=
        std::string::npos);
  s.strategy = "sync";
  s.ps = 0;
  s.train.precision = DType::bf16;
  s.train.model = "cnn";
  CHECK(validate(s).message().find("GPU workers train the cnn in f32 for now") != std::string::npos);
  s.train.precision = DType::f32;
  CHECK(validate(s).ok());  // the cnn trains on GPU workers too
  s.train.model = "linear";
  CHECK(validate(s).message().find("GPU workers train the built-in mlp or cnn for now (--model linear)") !=
        std::string::npos);
  s.library = "abc123";
  CHECK(validate(s).message().find("from a --lib library") != std::string::npos);
  s.library.clear();
  s.train.model = "mlp";
  s.strategy = "central";
  CHECK(validate(s).message().find("GPU workers run --strategy sync or async for now (central") != std::string::npos);

  // Mixed precision: bf16 anywhere a worker runs the trainer's own step; f16 only where the loop
  // scales the loss (local, sync); never in pipeline stages (their layers compute in f32).
  s = JobSpec{};
  s.train.precision = DType::f16;
  CHECK(validate(s).ok());
  s.strategy = "central";
  CHECK(validate(s).message().find("--precision f16 needs dynamic loss scaling, which central workers") !=
        std::string::npos);
  s.train.precision = DType::bf16;
  CHECK(validate(s).ok());

  // The gradient wire: auto follows the precision between hosts (its gradients are already rounded
  // to it), except for sharded jobs.
  s = JobSpec{};
  CHECK(effective_grad_wire(s, "tcp") == DType::f32);
  s.train.precision = DType::bf16;
  CHECK(effective_grad_wire(s, "tcp") == DType::bf16);
  CHECK(effective_grad_wire(s, "hierarchical") == DType::bf16);
  CHECK(effective_grad_wire(s, "shm") == DType::f32);  // one host: the conversion costs more than the bytes
  s.shard = "gradients";  // sharded: reduced in f32 unless asked (--reduce-dtype)
  CHECK(effective_grad_wire(s, "tcp") == DType::f32);
  s.shard = "none";
  s.grad_wire = "f32";
  CHECK(effective_grad_wire(s, "tcp") == DType::f32);
  s.grad_wire = "bf16";
  CHECK(effective_grad_wire(s, "shm") == DType::bf16);  // asked for: done
  s.shard = "parameters";
  CHECK(effective_grad_wire(s, "tcp") == DType::bf16);
  s.grad_wire = "f8";
  CHECK(validate(s).message().find("--grad-wire 'f8' is not one of auto, f32, bf16, f16") != std::string::npos);
  s.grad_wire = "bf16";
  s.strategy = "central";
  CHECK(validate(s).message().find("--grad-wire bf16 is for sync jobs") != std::string::npos);

  s = JobSpec{};
  s.checkpoint_every = 100;
  CHECK(validate(s).message().find("--checkpoint-every needs --checkpoint-dir") != std::string::npos);
  s.checkpoint_dir = "/tmp/ckpt";
  CHECK(validate(s).ok());
  s.strategy = "central";
  CHECK(validate(s).ok());
  s.strategy = "async";
  s.ps = 2;
  CHECK(validate(s).ok());  // async servers checkpoint (a failed one is restored within the job)
  s = JobSpec{};
  s.strategy = "async";
  s.ps = 1;
  s.resume_job = "00112233445566778899aabbccddeeff";
  s.resume_step = 10;
  CHECK(validate(s).ok());  // an async job resumes too (trainers/job/ps_resume.h)
  s.restart_on = "elsewhere";
  CHECK(validate(s).message().find("--restart-on 'elsewhere' is not one of any, same, other") != std::string::npos);
  s.restart_on = "other";
  s.resume_step = 0;
  CHECK(validate(s).message().find("resume_step must be >= 1") != std::string::npos);

  s = JobSpec{};
  s.train.model = "resnet-9000";
  CHECK(validate(s).message().find("--model 'resnet-9000' is not a known trainer") != std::string::npos);
}

TEST_CASE("job spec: pipeline settings travel and pipeline jobs that cannot run are refused", "[jobs][spec][pipeline]") {
  JobSpec s;
  s.strategy = "pipeline";
  s.stages = 4;
  s.workers = 8;
  s.microbatches = 8;
  s.schedule = "gpipe";
  s.stage_layers = "2,1,1,1";
  s.train.batch_size = 128;
  REQUIRE(validate(s).ok());
  auto back = from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->stages == 4);
  CHECK(back->microbatches == 8);
  CHECK(back->schedule == "gpipe");
  CHECK(back->stage_layers == "2,1,1,1");
  CHECK(pipeline_options(*back).replicas() == 2);

  JobSpec bad = s;
  bad.stages = 0;
  CHECK(validate(bad).message().find("--strategy pipeline needs --stages K") != std::string::npos);
  bad = s;
  bad.workers = 6;
  CHECK(validate(bad).message().find("--workers 6 is not a multiple of --stages 4") != std::string::npos);
  bad = s;
  bad.microbatches = 3;
  CHECK(validate(bad).message().find("does not divide into 2 replica(s) x 3 micro-batches") != std::string::npos);
  bad = s;
  bad.schedule = "zigzag";
  CHECK(validate(bad).message().find("--schedule 'zigzag' is not one of gpipe, 1f1b") != std::string::npos);
  bad = s;
  bad.stage_layers = "2,1";
  CHECK(validate(bad).message().find("gives 2 stages; --stages is 4") != std::string::npos);
  bad = s;
  bad.train.accumulate = 2;
  CHECK(validate(bad).message().find("--accumulate is not for --strategy pipeline") != std::string::npos);
  bad = JobSpec{};
  bad.stages = 2;
  CHECK(validate(bad).message().find("--stages is for --strategy pipeline") != std::string::npos);
}

TEST_CASE("job spec: --elastic travels with a sync job and is refused for other strategies", "[jobs][spec][elastic]") {
  JobSpec s;
  s.workers = 4;
  s.elastic = true;
  REQUIRE(validate(s).ok());
  auto back = from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->elastic);
  CHECK_FALSE(from_settings(to_settings(JobSpec{}))->elastic);
  JobSpec bad = s;
  bad.strategy = "async";
  bad.ps = 1;
  CHECK(validate(bad).message().find("--elastic is for --strategy sync (got async)") != std::string::npos);
  JobSpec micro = s;  // every shard's rows divide into the micro-batches, so any size of the job does
  micro.train.accumulate = 2;
  CHECK(validate(micro).ok());
}

TEST_CASE("job spec: --last-batch travels with the job, pad is refused where a strategy trains whole batches, "
          "drop where async trains every example", "[jobs][spec][last-batch]") {
  JobSpec s;
  s.workers = 4;
  s.train.last_batch = "pad";
  REQUIRE(validate(s).ok());
  auto back = from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->train.last_batch == "pad");
  CHECK(from_settings(to_settings(JobSpec{}))->train.last_batch.empty());
  JobSpec async = s;
  async.strategy = "async";
  async.ps = 1;
  CHECK(validate(async).ok());  // what its workers do anyway
  async.train.last_batch = "drop";
  CHECK(validate(async).message().find("--last-batch drop: an async job's workers train every example") !=
        std::string::npos);
  for (const char* strategy : {"central", "pipeline"}) {
    JobSpec bad = s;
    bad.strategy = strategy;
    if (bad.strategy == "pipeline") bad.stages = 2;
    INFO(strategy << ": " << validate(bad).to_string());
    CHECK(validate(bad).message().find("--last-batch pad is for sync jobs") != std::string::npos);
  }
  JobSpec gpu = s;
  gpu.gpus_per_worker = 1;
  CHECK(validate(gpu).message().find("sync GPU workers train whole batches for now") != std::string::npos);
  JobSpec unknown = s;
  unknown.train.last_batch = "fill";
  CHECK(validate(unknown).message().find("--last-batch 'fill' is not one of drop, pad") != std::string::npos);
}

TEST_CASE("job spec: --shard travels with a sync job and is refused where it cannot run", "[jobs][spec][sharded]") {
  JobSpec s;
  s.workers = 4;
  s.shard = "gradients";
  auto back = from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->shard == "gradients");
  CHECK(validate(s).ok());
  CHECK(effective_bucket_bytes(s) == 256 * 1024);  // auto: buckets, whatever the cores (pages go back per bucket)
  s.shard = "optimizer";
  CHECK(validate(s).ok());
  s.shard = "everything";
  CHECK(validate(s).message().find("--shard 'everything' is not one of none, optimizer, gradients, parameters") !=
        std::string::npos);
  s.shard = "parameters";
  CHECK(validate(s).ok());
  s.train.precision = DType::bf16;  // whether the model's layers compute in it is the worker's check (LayerModel)
  CHECK(validate(s).ok());
  s.train.precision = DType::f32;
  s.shard = "optimizer";
  s.strategy = "async";
  s.ps = 2;
  CHECK(validate(s).message().find("--shard optimizer is for sync jobs on CPU workers (got --strategy async)") !=
        std::string::npos);
  s = JobSpec{};
  s.shard = "gradients";
  s.train.accumulate = 2;
  s.train.batch_size = 64;
  CHECK(validate(s).message().find("--shard gradients with --accumulate 2") != std::string::npos);
  s.shard = "optimizer";
  CHECK(validate(s).ok());
}
