// A job's model file through the GCS (trainers/job/job_model_file.h) over the in-memory store: the
// submitter stores it and records its checksum; a worker reads the path while it holds those bytes
// and is given the GCS's copy (the runtime arg file_local, never the saved trainer args) once it
// does not; a resumed job keeps the checksum it began with; a model without a file ships nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "gcs/in_memory_store.h"
#include "tests/core/temp_dir.h"
#include "trainers/job/job_model_file.h"

using namespace troupe;
namespace fs = std::filesystem;

TEST_CASE("job model file: shipped at submit, the GCS's copy given to a worker whose path lacks it", "[jobs][files]") {
  testing::TempDir dir;
  gcs::InMemoryStore store;
  const std::string module = dir.file("net.pt"), cache = dir.file("cache");
  std::ofstream(module, std::ios::binary) << "version 1";
  job::JobSpec spec;
  spec.train.model = "torchscript";
  spec.train.trainer_args = {"file=" + module};
  REQUIRE(job::ship_model_file(store, spec).ok());
  REQUIRE(spec.model_file_sum.size() == 16u);

  job::JobSpec worker = spec;
  REQUIRE(job::use_model_file(&store, worker, cache).ok());
  CHECK(worker.train.runtime_args.empty());  // the path holds the bytes

  std::ofstream(module, std::ios::binary) << "version 2, edited after submitting";
  REQUIRE(job::use_model_file(&store, worker, cache).ok());
  REQUIRE(worker.train.runtime_args.size() == 1u);
  const std::string copy = cache + "/" + spec.model_file_sum + "/net.pt";
  CHECK(worker.train.runtime_args[0] == "file_local=" + copy);
  CHECK(worker.train.trainer_args == spec.train.trainer_args);  // what a saved model records: the file as given
  REQUIRE(job::use_model_file(&store, worker, cache).ok());  // again: one copy, not two
  CHECK(worker.train.runtime_args.size() == 1u);

  // A resumed job: the checksum the GCS holds stays, whatever the path holds now.
  job::JobSpec resumed = spec;
  REQUIRE(job::ship_model_file(store, resumed).ok());
  CHECK(resumed.model_file_sum == spec.model_file_sum);

  job::JobSpec mlp;
  mlp.model_file_sum = "stale";
  REQUIRE(job::ship_model_file(store, mlp).ok());
  CHECK(mlp.model_file_sum.empty());
  REQUIRE(job::use_model_file(&store, mlp, cache).ok());
  CHECK(mlp.train.runtime_args.empty());
}

TEST_CASE("job model file: a file missing at submit is refused naming it and the flag", "[jobs][files][errors]") {
  gcs::InMemoryStore store;
  job::JobSpec spec;
  spec.train.model = "torchscript";
  spec.train.trainer_args = {"file=/nonexistent/net.pt"};
  Status s = job::ship_model_file(store, spec);
  CHECK(s.code() == Code::not_found);
  CHECK_THAT(s.message(), Catch::Contains("/nonexistent/net.pt") && Catch::Contains("--model torchscript"));
}
