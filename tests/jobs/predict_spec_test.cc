// A prediction job's spec (trainers/job/predict_spec.h) and the assembly of its parts
// (trainers/job/predict_assembly.h): settings round-trip, refusals, shard sizes in whole batches,
// parts concatenated in order and a damaged part refused by its checksum.
#include <catch2/catch.hpp>

#include "data/npy_writer.h"
#include "tests/core/temp_dir.h"
#include "tests/data/numpy_fixture.h"
#include "trainers/job/predict_assembly.h"
#include "trainers/job/predict_spec.h"

using namespace troupe;
using namespace troupe::job;

TEST_CASE("predict spec: settings round-trip, refusals name the field, shards are whole batches", "[jobs][predict]") {
  PredictJobSpec s;
  s.name = "nightly";
  s.predict.model = "/m.safetensors";
  s.predict.data = "/d";
  s.predict.out = "/o/p.npy";
  s.predict.inputs = {"a", "b"};
  s.predict.batch_size = 256;
  s.parts_dir = "/o/.p.npy.parts-1";
  s.workers = 4;
  s.cpus_per_worker = 0.5;
  s.shard_rows = 1024;
  REQUIRE(validate(s).ok());
  auto back = predict_spec_from_settings(to_settings(s));
  REQUIRE(back.ok());
  CHECK(back->name == "nightly");
  CHECK(back->predict.inputs == std::vector<std::string>{"a", "b"});
  CHECK(back->predict.batch_size == 256);
  CHECK(back->cpus_per_worker == 0.5);
  CHECK(back->shard_rows == 1024);
  CHECK(to_settings(*back) == to_settings(s));
  CHECK(predict_spec_from_settings({"epochs=3"}).status().message().find("'epochs' is not known") != std::string::npos);
  CHECK(predict_spec_from_settings({"workers=x"}).status().message().find("does not parse") != std::string::npos);

  PredictJobSpec bad = s;
  bad.workers = 0;
  CHECK(validate(bad).message().find("--workers must be in [1, 4096]") != std::string::npos);
  bad = s;
  bad.shard_rows = 1000;
  CHECK(validate(bad).message().find("must be a multiple of --batch-size 256") != std::string::npos);
  bad = s;
  bad.predict.out = "p.npy";
  CHECK(validate(bad).message().find("must be an absolute path") != std::string::npos);
  bad = s;  // data specs: text files and lists of files, each absolute
  bad.predict.data = "text:/data/a.txt,/data/b.txt";
  CHECK(validate(bad).ok());
  bad.predict.data = "text:a.txt";
  CHECK(validate(bad).message().find("--data 'text:a.txt' must name absolute paths") != std::string::npos);
  bad.predict.data = "/data/a.npy,b.npy";
  CHECK_FALSE(validate(bad).ok());

  s.shard_rows = 0;  // auto: about 8 shards per predictor, whole batches
  CHECK(shard_rows_for(s, 240000) == 7680);  // 938 batches / 32 shards -> 30 batches
  CHECK(shard_count(240000, 7680) == 32);
  CHECK(shard_rows_for(s, 10) == 256);
  CHECK(shard_count(10, 256) == 1);
}

TEST_CASE("predict assembly: parts in shard order make the output, a damaged part is refused", "[jobs][predict]") {
  troupe::testing::TempDir dir;
  const std::string parts = dir.file("parts");
  std::filesystem::create_directories(parts);
  std::vector<gcs::PredictedPart> recs;
  std::vector<float> all;
  for (int s = 0; s < 3; ++s) {
    const int64_t rows = s == 2 ? 1 : 2;
    std::vector<float> v;
    for (int64_t i = 0; i < rows * 3; ++i) v.push_back(static_cast<float>(100 * s + i));
    REQUIRE(data::write_npy(part_path(parts, s), v.data(), {rows, 3}).ok());
    gcs::PredictedPart p;
    p.shard = s;
    p.first_row = 2 * s;
    p.rows = rows;
    p.width = 3;
    p.checksum = outputs_checksum(v.data(), rows * 3);
    recs.push_back(p);
    all.insert(all.end(), v.begin(), v.end());
  }
  REQUIRE(assemble_parts(parts, recs, 5, 3, dir.file("out.npy")).ok());
  CHECK(troupe::testing::read_bytes(dir.file("out.npy")) == data::npy_bytes(all.data(), {5, 3}));
  // NumPy reads it.
  troupe::testing::run_numpy(dir.path(), "p = np.load('out.npy'); assert p.shape == (5, 3) and p[4, 2] == 202, p");

  std::vector<float> other(6, 1.0f);
  REQUIRE(data::write_npy(part_path(parts, 1), other.data(), {2, 3}).ok());
  Status st = assemble_parts(parts, recs, 5, 3, dir.file("bad.npy"));
  CHECK(st.message().find("part-1.npy does not match the checksum its predictor recorded") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("bad.npy")));
  // A part short of the rows: refused, nothing written.
  std::vector<float> one(all.begin() + 6, all.begin() + 12);
  REQUIRE(data::write_npy(part_path(parts, 1), one.data(), {2, 3}).ok());
  recs.pop_back();
  CHECK(assemble_parts(parts, recs, 5, 3, dir.file("short.npy")).message().find("the parts hold 4 rows of 5") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("short.npy")));
}
