// `--model NAME:FILE` (trainers/setup/model_args.h): torchscript:FILE is the long form's model and
// file arg with the path made absolute, as is the long form's; an empty FILE, a model without a file
// and a file given both ways are refused naming the flag.
#include <catch2/catch.hpp>

#include <filesystem>

#include "trainers/setup/model_args.h"

using namespace troupe;

TEST_CASE("model file arg: torchscript:FILE is --model torchscript --trainer-arg file=FILE, made absolute",
          "[setup][model_file]") {
  const std::string here = std::filesystem::current_path().string();
  TrainOptions o;
  o.model = "torchscript:nets/mlp.pt";
  o.trainer_args = {"threads=2"};
  REQUIRE(expand_model_file(o).ok());
  CHECK(o.model == "torchscript");
  CHECK(o.trainer_args == std::vector<std::string>{"threads=2", "file=" + here + "/nets/mlp.pt"});
  CHECK(model_file_path(o) == here + "/nets/mlp.pt");
  REQUIRE(expand_model_file(o).ok());  // again: nothing changes
  CHECK(o.trainer_args.back() == "file=" + here + "/nets/mlp.pt");

  TrainOptions long_form;
  long_form.model = "torchscript";
  long_form.trainer_args = {"file=./mlp.pt"};
  REQUIRE(expand_model_file(long_form).ok());
  CHECK(long_form.trainer_args == std::vector<std::string>{"file=" + here + "/mlp.pt"});

  TrainOptions mlp;  // no file arg: untouched
  mlp.trainer_args = {"file=x"};
  REQUIRE(expand_model_file(mlp).ok());
  CHECK(mlp.trainer_args == std::vector<std::string>{"file=x"});
  CHECK(model_file_path(mlp).empty());
  CHECK(model_file_key("torchscript") == "file");
}

TEST_CASE("model file arg: torchscript: with no file, a model that reads none and a file given twice are refused",
          "[setup][model_file][errors]") {
  TrainOptions o;
  o.model = "torchscript:";
  Status empty = expand_model_file(o);
  CHECK(empty.code() == Code::invalid_argument);
  CHECK_THAT(empty.message(), Catch::Contains("--model torchscript: names no file") &&
                                  Catch::Contains("--model torchscript:model.pt"));
  o.model = "mlp:net.pt";
  CHECK_THAT(expand_model_file(o).message(), Catch::Contains("'mlp' reads no file"));
  o.model = "torchscript:a.pt";
  o.trainer_args = {"file=b.pt"};
  CHECK_THAT(expand_model_file(o).message(), Catch::Contains("both name the file"));
}

TEST_CASE("model args: only the torchscript model is given the worker's cpus (the built-in models refuse settings "
          "they do not know)", "[setup][model_file]") {
  CHECK(model_takes_cpus("torchscript"));
  for (const char* m : {"mlp", "cnn", "gpt", "mine"}) CHECK_FALSE(model_takes_cpus(m));
}
