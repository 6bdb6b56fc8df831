// The gpt through the runtime: it learns an order-2 Markov chain's token stream down to the
// chain's entropy rate (the floor no model beats) through `troupe train`'s own path (files,
// --seq-len windows, adamw with decay on matrices, warm-up and cosine, --clip-grad-norm); two sync
// replicas hold what one process training on the global batch holds; --save and --init-from carry
// its blocks and configuration; bad settings are refused naming the flag.
#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>
#include <thread>

#include "collectives/inproc_transport.h"
#include "tests/core/temp_dir.h"
#include "tests/models/markov_tokens.h"
#include "tests/support/numeric_test_util.h"
#include "trainers/local/local_trainer.h"
#include "trainers/predict/predict.h"
#include "data/readers/npy_reader.h"
#include "data/safetensors.h"
#include "models/gpt/gpt_generate.h"
#include "trainers/sync/trainer_driver.h"
#include "trainers/setup/trainer_setup.h"

using namespace troupe;
using troupe::testing::MarkovChain2;
using troupe::testing::relative_difference;

namespace {

TrainOptions gpt_job() {
  TrainOptions o;
  o.model = "gpt";
  o.trainer_args = {"layers=1", "heads=2", "dim=32"};
  o.seq_len = 16;
  o.batch_size = 16;
  o.optimizer = "adamw";
  o.lr = 0.01f;
  o.weight_decay = 0.01f;
  o.weight_decay_params = "matrices";
  o.warmup_steps = 20;
  o.clip_grad_norm = 1.0f;
  o.seed = 3;
  return o;
}

// The chain's streams as --data files in `dir`: train.bin (120,000 tokens) and val.bin (30,000,
// returned).
std::vector<uint16_t> write_chain_streams(const MarkovChain2& chain, const troupe::testing::TempDir& dir) {
  troupe::testing::write_u16(dir.file("train.bin"), chain.sample(120000, 1));
  std::vector<uint16_t> val = chain.sample(30000, 2);
  troupe::testing::write_u16(dir.file("val.bin"), val);
  return val;
}

}  // namespace

// An order-1 chain: every position's next token depends on the current one only, so the floor
// is the entropy rate at every position of every window.
TEST_CASE("the gpt learns a Markov chain to within 0.05 nats of its entropy rate", "[models][gpt][train]") {
  const MarkovChain2 chain(16, 3, 5, 1);
  const double rate = chain.entropy_rate();
  REQUIRE(rate > 0.5);  // far from trivial, and far below log(16) = 2.77 (what a unigram model gets near)
  troupe::testing::TempDir dir;
  const std::vector<uint16_t> val = write_chain_streams(chain, dir);
  TrainOptions o = gpt_job();
  o.data = dir.path();
  o.seq_len = 32;
  o.epochs = 2;
  o.evaluate_each_epoch = false;
  o.save_path = dir.file("gpt.safetensors");
  const std::clock_t cpu_start = std::clock();
  auto r = train_local(o, {});
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  INFO("validation loss " << r->test_loss << " nats/token, entropy rate " << rate << ", the chain's own loss on "
                          << "these windows " << chain.window_loss(val, o.seq_len) << "; " << cpu_seconds << " s of CPU");
  CHECK(r->model == "gpt L1 H2 D32 T32 V16");
  CHECK(r->test_accuracy == -1);
  CHECK(r->test_loss < rate + 0.05);
  CHECK(r->test_loss > rate - 0.05);  // a sample of 30,000 tokens: its own rate is within a few hundredths
  CHECK(cpu_seconds < 20);           // about 1.5 s on one core of the build host (docs/models.md)

  SECTION("the saved model carries its configuration, and --init-from starts where it ended") {
    auto file = data::read_safetensors(o.save_path);
    REQUIRE(file.ok());
    CHECK(file->metadata.at("troupe.description").find("gpt L1 H2 D32 T32 V16") != std::string::npos);
    CHECK(file->metadata.at("troupe.trainer_args") == "layers=1;heads=2;dim=32");
    TrainOptions again = o;
    again.save_path.clear();
    again.init_from = o.save_path;
    again.max_steps = 1;
    again.lr = 1e-6f;
    auto r2 = train_local(again, {});
    INFO(r2.status().to_string());
    REQUIRE(r2.ok());
    CHECK(r2->test_loss < rate + 0.05);  // one tiny step from the trained parameters
  }
  SECTION("troupe predict runs the saved model over a token stream's windows: next-token logits, accuracy, loss") {
    PredictOptions p;
    p.model = o.save_path;
    p.data = dir.file("val.bin");
    p.out = dir.file("next.npy");
    p.batch_size = 100;  // windows per batch: the last one short
    auto pr = predict_local(p);
    INFO(pr.status().to_string());
    REQUIRE(pr.ok());
    CHECK(pr->rows == (30000 - 1) / 32);  // the stream's whole windows, in order
    CHECK(pr->outputs == 16);             // the vocabulary
    // The validation loss training reported is over these very windows.
    CHECK(pr->loss == Approx(r->test_loss).epsilon(1e-4));
    CHECK(pr->accuracy > 0.3);  // each token has 3 successors: far above 1/16
    auto npy = data::read_npy(p.out);
    REQUIRE(npy.ok());
    CHECK(npy->shape == std::vector<int64_t>{pr->rows, 16});

    troupe::testing::write_u16(dir.file("wide.bin"), std::vector<uint16_t>(100, 40));  // ids past the vocabulary
    p.data = dir.file("wide.bin");
    auto wide = predict_local(p);
    CHECK(wide.status().code() == Code::invalid_argument);
    CHECK_THAT(wide.status().message(), Catch::Contains("outside the vocabulary [0, 16)"));
  }
  SECTION("troupe generate continues a prompt with transitions the chain can make") {
    models::GenerateOptions g;
    g.model = o.save_path;
    g.prompt = {0, chain.sample(1, 7)[0]};
    g.tokens = 29;  // 31 of the 32 positions
    g.temperature = 0;
    auto out = models::generate(g);
    INFO(out.status().to_string());
    REQUIRE(out.ok());
    CHECK(out->model == "gpt L1 H2 D32 T32 V16");
    REQUIRE(out->ids.size() == 31);
    for (size_t i = 2; i < out->ids.size(); ++i) {
      INFO("token " << i << ": " << out->ids[i - 1] << " -> " << out->ids[i]);
      CHECK(chain.next[(0 * 16 + out->ids[i - 1]) * 16 + out->ids[i]] > 0);  // order 1: any a, here 0
    }
    g.temperature = 0.8;
    g.top_k = 3;
    auto sampled = models::generate(g);
    REQUIRE(sampled.ok());
    CHECK(sampled->ids != out->ids);  // sampling, not the arg-max (seeded: the same every run)
    CHECK(models::generate(g)->ids == sampled->ids);
    g.tokens = 31;
    CHECK_THAT(models::generate(g).status().message(), Catch::Contains("exceed the model's context of 32 positions"));
    g.tokens = 3;
    g.prompt = {16};
    CHECK_THAT(models::generate(g).status().message(), Catch::Contains("id 16 is outside the model's vocabulary of 16"));
  }
}

// --precision bf16 / f16 (the products' operands rounded, f32 master weights; f16 with the
// runtime's loss scaling): the chain learned as in f32, to within a few hundredths of a nat.
TEST_CASE("the gpt in bf16 and f16 learns the Markov chain as f32 does", "[models][gpt][train][precision]") {
  const MarkovChain2 chain(16, 3, 5, 1);
  const double rate = chain.entropy_rate();
  troupe::testing::TempDir dir;
  write_chain_streams(chain, dir);
  TrainOptions o = gpt_job();
  o.data = dir.path();
  o.seq_len = 32;
  o.epochs = 1;
  auto f32 = train_local(o, {});
  INFO(f32.status().to_string());
  REQUIRE(f32.ok());
  for (DType precision : {DType::bf16, DType::f16}) {
    o.precision = precision;
    auto low = train_local(o, {});
    INFO(dtype_name(precision) << ": " << low.status().to_string());
    REQUIRE(low.ok());
    INFO(dtype_name(precision) << " validation loss " << low->test_loss << ", f32 " << f32->test_loss
                               << ", entropy rate " << rate);
    CHECK(low->precision == dtype_name(precision));
    CHECK(low->test_loss == Approx(f32->test_loss).margin(0.03));
    CHECK(low->test_loss < rate + 0.1);
    CHECK(low->test_loss != f32->test_loss);  // it computed in the type
  }
}

// An order-2 chain: the next token depends on the last two, so only a model whose attention finds
// the previous position gets below H(next | last token) (2.5 nats here); the chain's rate is 0.97.
// Each window's first target has one token of context, so the windowed floor is ~0.99 at --seq-len
// 64; the model gets within 0.15 of the rate in 5 epochs (about 1.07).
TEST_CASE("the gpt's attention learns an order-2 Markov chain", "[models][gpt][train]") {
  const MarkovChain2 chain(16, 3, 5, 2);
  const double rate = chain.entropy_rate(), last_only = chain.entropy_given_last();
  REQUIRE(last_only > rate + 1.0);
  troupe::testing::TempDir dir;
  const std::vector<uint16_t> val = write_chain_streams(chain, dir);
  TrainOptions o = gpt_job();
  o.data = dir.path();
  o.seq_len = 64;
  o.batch_size = 8;
  o.lr = 0.02f;
  o.epochs = 5;
  o.evaluate_each_epoch = false;
  auto r = train_local(o, {});
  INFO(r.status().to_string());
  REQUIRE(r.ok());
  INFO("validation loss " << r->test_loss << ", entropy rate " << rate << ", the chain's own loss on these windows "
                          << chain.window_loss(val, o.seq_len) << ", given the last token only " << last_only);
  CHECK(r->test_loss < rate + 0.15);
}

TEST_CASE("2 and 4 sync gpt replicas hold what one process holds at the same global batch", "[models][gpt][sync]") {
  const MarkovChain2 chain(12, 3, 9);
  const Dataset train = troupe::testing::token_window_dataset(chain.sample(16 * 8 * 30 + 1, 3), 8, 12);
  const Dataset test = troupe::testing::token_window_dataset(chain.sample(8 * 20 + 1, 4), 8, 12);
  TrainOptions o = gpt_job();
  o.seq_len = 8;
  o.trainer_args = {"layers=2", "heads=2", "dim=16", "tie=1"};
  o.batch_size = 16;
  o.epochs = 1;
  o.max_steps = 25;
  o.clip_grad_norm = 0.05f;  // small enough to clip every step: the norm must be the global one
  std::vector<float> want;
  auto one = train_with_trainer(o, train, test, {}, &want);
  INFO(one.status().to_string());
  REQUIRE(one.ok());
  const size_t bucket_bytes = GENERATE(size_t{0}, size_t{4096});  // one all-reduce, or buckets overlapping backward
  const int replicas = GENERATE(2, 4);
  auto transports = collectives::make_inproc_group(replicas);
  std::vector<std::vector<float>> got(static_cast<size_t>(replicas));
  std::vector<Status> status(static_cast<size_t>(replicas));
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r)
    threads.emplace_back([&, r] {
      collectives::Communicator comm(std::move(transports[r]));
      Replica replica;
      replica.comm = &comm;
      replica.timeout = std::chrono::seconds(30);
      replica.bucket_bytes = bucket_bytes;
      auto result = train_replica(o, train, test, replica, {}, &got[r]);
      if (!result.ok()) status[r] = result.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < replicas; ++r) {
    INFO("replica " << r << ": " << status[r].to_string());
    REQUIRE(status[r].ok());
    CHECK(got[static_cast<size_t>(r)] == got[0]);
  }
  INFO(replicas << " replicas, bucket bytes " << bucket_bytes << ": relative difference "
                << relative_difference(got[0], want));
  CHECK(relative_difference(got[0], want) < 1e-5);
  // Clipping mattered: without it the same job ends elsewhere.
  TrainOptions unclipped = o;
  unclipped.clip_grad_norm = 0;
  std::vector<float> free;
  REQUIRE(train_with_trainer(unclipped, train, test, {}, &free).ok());
  CHECK(relative_difference(free, want) > 1e-3);
}

TEST_CASE("gpt jobs with bad settings are refused naming the flag", "[models][gpt][errors]") {
  const MarkovChain2 chain(12, 3, 9);
  const Dataset train = troupe::testing::token_window_dataset(chain.sample(8 * 40 + 1, 3), 8, 12);
  auto refusal = [&](const std::function<void(TrainOptions&)>& change) {
    TrainOptions o = gpt_job();
    o.seq_len = 8;
    o.max_steps = 1;
    change(o);
    auto r = train_with_trainer(o, train, train);
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK_THAT(refusal([](TrainOptions& o) { o.trainer_args = {"heads=3", "dim=32"}; }),
             Catch::Contains("--trainer-arg heads=3 does not divide dim=32"));
  CHECK_THAT(refusal([](TrainOptions& o) { o.trainer_args = {"context=4"}; }),
             Catch::Contains("--seq-len 8 is longer than the model's context of 4 positions (--trainer-arg context)"));
  CHECK_THAT(refusal([](TrainOptions& o) { o.trainer_args = {"vocab=8"}; }),
             Catch::Contains("the data's token ids reach 11, outside --trainer-arg vocab=8"));
  CHECK_THAT(refusal([](TrainOptions& o) { o.clip_grad_norm = -1; }), Catch::Contains("--clip-grad-norm must be"));
  CHECK_THAT(refusal([](TrainOptions& o) { o.optimizer = "adam"; }),
             Catch::Contains("--weight-decay-params matrices chooses the blocks of adamw's decoupled decay"));
  Dataset images = train;
  images.schema.clear();  // an image and a class: no token windows
  images.target_width = 1;
  images.labels.resize(static_cast<size_t>(images.count));
  TrainOptions o = gpt_job();
  auto r = train_with_trainer(o, images, images);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("needs a field 'tokens'"));
}

// The runtime evaluates 1000 windows per call; the gpt cuts a call into slices of ~8192 tokens so
// the attention's probabilities stay small. The slices must add up to what separate calls give.
TEST_CASE("the gpt evaluates and predicts a large batch in slices that add up", "[models][gpt]") {
  const MarkovChain2 chain(12, 3, 9);
  const int64_t T = 8, windows = 2500;  // 1024 windows a slice: three slices, the last one partial
  const Dataset data = troupe::testing::token_window_dataset(chain.sample(T * windows + 1, 5), T, 12);
  TrainOptions o = gpt_job();
  o.seq_len = T;
  auto setup = set_up_trainer(o, data.spec(), 0, 1);
  REQUIRE(setup.ok());
  std::vector<float> params(setup->space.size());
  init_parameters(setup->space, 3, params.data());
  const Parameters p(params.data(), params.size());
  Trainer& trainer = *setup->trainer;
  BatchFields fields;
  const DataSpec spec = data.spec();
  auto whole = trainer.evaluate(rows_batch(data, 0, windows, &fields, spec), p);
  REQUIRE(whole.ok());
  double sum = 0;
  for (int64_t first = 0; first < windows; first += 100) {
    BatchFields part_fields;
    auto part = trainer.evaluate(rows_batch(data, first, 100, &part_fields, spec), p);
    REQUIRE(part.ok());
    sum += static_cast<double>(part->loss) * 100;
  }
  CHECK(whole->loss == Approx(sum / windows).epsilon(1e-5));
  const int64_t V = trainer.prediction_width();
  REQUIRE(V == 12);
  std::vector<float> all(static_cast<size_t>(windows * V)), last(static_cast<size_t>(100 * V));
  REQUIRE(trainer.predict(rows_batch(data, 0, windows, &fields, spec), p, all.data()).ok());
  BatchFields last_fields;
  REQUIRE(trainer.predict(rows_batch(data, windows - 100, 100, &last_fields, spec), p, last.data()).ok());
  CHECK(troupe::testing::first_difference(last.data(), all.data() + (windows - 100) * V, last.size(), 1e-5, 1e-6) == "");
}
