// Checkpoint directories as jobs leave them, written without a cluster for the export tests: a
// job's JOB.json, and per step its shard files (contiguous ranges of the flat buffer, as sync
// replicas, parameter servers or pipeline stages cut it) and the MANIFEST.trpm mirror that commits
// them (gcs/checkpoint_mirror.h). The parameters of step s are a pure function of (s, index), so a
// test knows what each checkpoint must export.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "core/version.h"
#include "gcs/checkpoint_mirror.h"
#include "trainers/checkpoint/checkpoint.h"
#include "trainers/checkpoint/checkpoint_catalog.h"
#include "trainers/job/job_checkpoint.h"
#include "trainers/job/job_file.h"
#include "trainers/job/job_spec.h"
#include "trainers/setup/trainer_setup.h"

namespace troupe::testing {

// The parameters the fixture's checkpoint of `step` holds: distinct, signed, not round numbers.
inline std::vector<float> step_params(size_t n, int64_t step) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + step)) * 0.1f;
  return p;
}

struct FakeJob {
  job::JobSpec spec;
  JobId job = JobId::random();
  DataSpec data{784, 10};
  size_t total = 0;  // parameters of the trainer the spec sets up

  // A small MLP's job checkpointing under `root`.
  explicit FakeJob(const std::string& root, const std::string& strategy = "sync") {
    spec.strategy = strategy;
    spec.workers = 2;
    if (strategy == "async") spec.ps = 2;
    spec.checkpoint_every = 10;
    spec.checkpoint_dir = root;
    spec.train.hidden = {16, 8};
    auto setup = set_up_trainer(spec.train, data, 0, 1);
    REQUIRE(setup.ok());
    total = setup->space.size();
  }

  std::string dir() const { return job::checkpoint_dir(spec, job); }

  // Its JOB.json (`library`: the trainer library's file name, "" for a built-in trainer).
  void describe(const std::string& library = "") const {
    REQUIRE(job::ensure_job_file(dir(), job::JobFile{job, TROUPE_VERSION_STRING, data, library, job::to_settings(spec)})
                .ok());
  }

  // Writes the checkpoint of `step` as shards over [cuts[i], cuts[i + 1]) and commits it (mirror).
  void checkpoint(int64_t step, const std::vector<size_t>& cuts) const {
    const std::vector<float> params = step_params(total, step);
    checkpoint::Manifest m;
    m.tag = job.hex();
    m.step = step;
    m.dir = checkpoint::step_dir(dir(), step);
    const int shards = static_cast<int>(cuts.size()) - 1;
    for (int i = 0; i < shards; ++i) {
      checkpoint::ShardData d;
      d.header.tag = job.hex();
      d.header.step = step;
      d.header.epoch = 1;
      d.header.epoch_step = step;
      d.header.shard = i;
      d.header.shards = shards;
      d.header.total_floats = total;
      d.header.begin = cuts[i];
      d.header.end = cuts[i + 1];
      d.params.assign(params.begin() + cuts[i], params.begin() + cuts[i + 1]);
      d.optimizer.name = "sgd";
      d.optimizer.steps = step;
      d.optimizer.vectors.push_back(std::vector<float>(cuts[i + 1] - cuts[i], 0.5f));
      std::filesystem::create_directories(m.dir);
      auto w = checkpoint::write_shard_file(checkpoint::shard_path(m.dir, i, shards), d);
      REQUIRE(w.ok());
      m.shards.push_back(*w);
    }
    gcs::CheckpointMirror mirror;
    mirror.manifest = checkpoint::to_record(job, m);
    REQUIRE(gcs::write_checkpoint_mirror(mirror).ok());
  }

  // Equal slices of `n` (a sync job's replicas).
  std::vector<size_t> slices(int n) const {
    std::vector<size_t> cuts{0};
    for (int i = 0; i < n; ++i) {
      size_t b = 0, e = 0;
      checkpoint::shard_range(total, i, n, &b, &e);
      cuts.push_back(e);
    }
    return cuts;
  }
};

}  // namespace troupe::testing
