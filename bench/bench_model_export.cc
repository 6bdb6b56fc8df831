// bench_model_export: a 100M-parameter model out of troupe and back in, beside `dd` moving the same
// number of bytes on the same file system in the same invocation (issue 22):
//
//   save:    save_model of the MLP 784-12000-7600-10 (100.7M parameters, f32): the safetensors
//            file built and written durably (temp + fsync + rename + directory fsync)
//   load:    load_model_into from that file (read, every check, converted into the flat buffer)
//   export:  `troupe export` of a 4-shard checkpoint of the same parameters (export_model: the
//            shards read and verified, the trainer set up, the file written as save writes it)
//   dd:      dd if=/dev/zero of=F bs=1M count=<the file's MiB> conv=fsync, and dd if=F of=/dev/null
//
//   build/bin/bench_model_export [--dir /tmp/troupe-bench-export] [--runs 5]
//
// Reads are from the page cache (the file was just written), for troupe and dd alike. MB/s counts
// the model file's bytes (1e6 bytes a MB); medians of --runs. Every load is checked bit for bit
// against the parameters saved, every export against save's tensors.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/version.h"
#include "data/safetensors.h"
#include "gcs/checkpoint_mirror.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/export/model_export.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_file.h"
#include "trainers/setup/model_file.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "bench_model_export: %s\n", what.c_str());
  return 1;
}

// Seconds `command` took through the shell (its output dropped), or a negative value on failure.
double time_shell(const std::string& command) {
  const auto t0 = bench::Clock::now();
  const int rc = std::system((command + " >/dev/null 2>&1").c_str());
  return rc == 0 ? bench::seconds_since(t0) : -1;
}

// A 4-shard checkpoint of `params` for job `job`, committed as a job leaves it (shards, mirror,
// JOB.json): what `troupe export` reads.
Status write_checkpoint(const job::JobSpec& spec, const JobId& id, const DataSpec& data, const std::vector<float>& params) {
  const std::string dir = job::checkpoint_dir(spec, id);
  TROUPE_RETURN_IF_ERROR(job::ensure_job_file(dir, job::JobFile{id, TROUPE_VERSION_STRING, data, "", job::to_settings(spec)}));
  checkpoint::Manifest m;
  m.tag = id.hex();
  m.step = 100;
  m.dir = checkpoint::step_dir(dir, m.step);
  fs::create_directories(m.dir);
  const int shards = 4;
  for (int i = 0; i < shards; ++i) {
    checkpoint::ShardData d;
    d.header.tag = id.hex();
    d.header.step = m.step;
    d.header.epoch = 1;
    d.header.epoch_step = m.step;
    d.header.shard = i;
    d.header.shards = shards;
    d.header.total_floats = params.size();
    size_t b = 0, e = 0;
    checkpoint::shard_range(params.size(), i, shards, &b, &e);
    d.header.begin = b;
    d.header.end = e;
    d.params.assign(params.begin() + static_cast<std::ptrdiff_t>(b), params.begin() + static_cast<std::ptrdiff_t>(e));
    d.optimizer.name = "sgd";
    d.optimizer.steps = m.step;
    auto w = checkpoint::write_shard_file(checkpoint::shard_path(m.dir, i, shards), d);
    if (!w.ok()) return w.status();
    m.shards.push_back(*w);
  }
  gcs::CheckpointMirror mirror;
  mirror.manifest = checkpoint::to_record(id, m);
  return gcs::write_checkpoint_mirror(mirror);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp/troupe-bench-export";
  int runs = 5;
  CLI::App app{"a 100M-parameter model saved, loaded and exported, beside dd"};
  app.add_option("--dir", dir, "Where the files go (the file system measured)");
  app.add_option("--runs", runs, "Runs per figure (medians)")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  fs::remove_all(dir);
  fs::create_directories(dir);

  job::JobSpec spec;
  spec.workers = 4;
  spec.checkpoint_every = 100;
  spec.checkpoint_dir = dir + "/ckpt";
  spec.train.hidden = {12000, 7600};
  const DataSpec data{784, 10};
  auto setup = set_up_trainer(spec.train, data, 0, 1);
  if (!setup.ok()) return fail(setup.status().to_string());
  std::vector<float> params(setup->space.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>((i * 2654435761u) % 1000003) * 1e-6f - 0.5f;
  const std::string file = dir + "/model.safetensors";
  std::printf("# %s\n# %s, %s, %zu parameters (%s), files in %s, medians of %d\n",
              bench::command_line(argc, argv).c_str(), bench::cpu_model().c_str(), TROUPE_VERSION_STRING,
              params.size(), setup->model.c_str(), dir.c_str(), runs);

  std::vector<double> save_s, load_s, export_s, dd_write_s, dd_read_s;
  std::vector<float> loaded(params.size());
  for (int r = 0; r < runs; ++r) {
    auto t0 = bench::Clock::now();
    Status st = save_model(file, setup->space, params.data(), DType::f32, {{kModelTrainer, "mlp"}});
    save_s.push_back(bench::seconds_since(t0));
    if (!st.ok()) return fail(st.to_string());

    std::fill(loaded.begin(), loaded.end(), 0.0f);
    t0 = bench::Clock::now();
    st = load_model_into(file, setup->space, "mlp", false, loaded.data());
    load_s.push_back(bench::seconds_since(t0));
    if (!st.ok()) return fail(st.to_string());
    if (std::memcmp(loaded.data(), params.data(), params.size() * sizeof(float)) != 0)
      return fail("the loaded parameters differ from those saved");
  }
  const uint64_t bytes = fs::file_size(file);
  const uint64_t mib = (bytes + (1u << 20) - 1) >> 20;

  const JobId id = JobId::random();
  Status st = write_checkpoint(spec, id, data, params);
  if (!st.ok()) return fail(st.to_string());
  auto src = exporting::source_from_directory(job::checkpoint_dir(spec, id));
  if (!src.ok()) return fail(src.status().to_string());
  const std::string exported = dir + "/exported.safetensors";
  for (int r = 0; r < runs; ++r) {
    exporting::ExportOptions o;
    o.out = exported;
    auto t0 = bench::Clock::now();
    auto e = exporting::export_model(*src, o);
    export_s.push_back(bench::seconds_since(t0));
    if (!e.ok()) return fail(e.status().to_string());
  }
  auto a = data::read_safetensors(file), b = data::read_safetensors(exported);
  if (!a.ok() || !b.ok() || a->tensors.size() != b->tensors.size()) return fail("cannot read back the files");
  for (size_t i = 0; i < a->tensors.size(); ++i)
    if (a->tensors[i].bytes != b->tensors[i].bytes) return fail("export's tensor " + a->tensors[i].name + " differs from save's");

  const std::string dd_file = dir + "/dd.bin";
  for (int r = 0; r < runs; ++r) {
    const double w = time_shell("dd if=/dev/zero of=" + dd_file + " bs=1M count=" + std::to_string(mib) + " conv=fsync");
    const double rd = time_shell("dd if=" + dd_file + " of=/dev/null bs=1M");
    if (w < 0 || rd < 0) return fail("dd failed");
    dd_write_s.push_back(w);
    dd_read_s.push_back(rd);
  }
  const double dd_bytes = static_cast<double>(mib << 20);

  auto mbps = [](double b, double s) { return b / s / 1e6; };
  const double save = bench::median(save_s), load = bench::median(load_s), exp = bench::median(export_s);
  const double ddw = bench::median(dd_write_s), ddr = bench::median(dd_read_s);
  std::printf("%-8s %10s %10s %12s\n", "what", "seconds", "MB/s", "vs dd");
  std::printf("%-8s %10.3f %10.0f %11.2fx\n", "save", save, mbps(bytes, save), mbps(bytes, save) / mbps(dd_bytes, ddw));
  std::printf("%-8s %10.3f %10.0f %11.2fx\n", "export", exp, mbps(bytes, exp), mbps(bytes, exp) / mbps(dd_bytes, ddw));
  std::printf("%-8s %10.3f %10.0f %12s\n", "dd write", ddw, mbps(dd_bytes, ddw), "1.00x");
  std::printf("%-8s %10.3f %10.0f %11.2fx\n", "load", load, mbps(bytes, load), mbps(bytes, load) / mbps(dd_bytes, ddr));
  std::printf("%-8s %10.3f %10.0f %12s\n", "dd read", ddr, mbps(dd_bytes, ddr), "1.00x");
  fs::remove_all(dir);
  return 0;
}
