// Inputs that crashed the importer under the fuzz targets' sanitizers (fuzz/: found by
// the fuzzers, or written by hand against the same targets), kept in fuzz/regressions/:
// text/*.onnxtxt, binary/*.onnx and folder/NAME/ (a backend-test folder). Each is now
// refused with a message that names its cause, through the library and through the CLI,
// or (two valid models) imported with the right values. The fuzzers replay them too
// (they are in the seed corpus), under ASan and UBSan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "reference/interpreter.h"
#include "e2e/cli_test_util.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

const fs::path kRegressionDir = fs::path(TILEFUSE_SOURCE_DIR) / "fuzz" / "regressions";

struct Regression {
  std::string path;                // under fuzz/regressions
  std::vector<std::string> words;  // each in the error message; none: the model imports
};

// What each input crashed with before its fix, and what it gets now.
const std::vector<Regression>& Regressions() {
  static const std::vector<Regression> list = {
      // Conv's group multiplied the weight's input channels past int64 (8 · 2^62; UBSan:
      // InferWindow). Found by CI's 10-second slice of the binary fuzzer, 2026-11-24.
      {"text/conv_group_overflow.onnxtxt", {"node 'y' (Conv", "does not fit input [1,8,4,4] with group 4611686018427387904"}},
      {"binary/conv_group_overflow.onnx", {"(Conv, opset 18)", "with group 4611686018427387904"}},
      // A tensor declaring far more elements than it holds was allocated before its data
      // was counted: 64 GiB for 92 bytes (libFuzzer: malloc limit).
      {"binary/tensor_larger_than_its_data.onnx", {"initializer 'w'", "holds 1 values but its shape [131072,131072]"}},
      {"folder/input_larger_than_its_data", {"input_0.pb", "holds 1 values but its shape [131072,131072]"}},
      // Resize's scale times a dim converted to int64 past its range: an infinite scale (UBSan:
      // OutputSizes). Found by CI's 10-second slice of the binary fuzzer, 2026-11-25; the text
      // one is a finite scale of 1e30.
      {"binary/resize_with_an_infinite_scale.onnx", {"node 'y' (Resize", "scale inf makes axis 0 of size 4 larger than"}},
      {"text/resize_scale_past_int64.onnxtxt", {"node 'y' (Resize", "makes axis 0 of size 4 larger than 1099511627776 elements"}},
      // A graph input's dims multiplied past int64 (UBSan: NumElements, constant tracker).
      {"text/input_dim_overflow.onnxtxt", {"input 'x'", "[5,9223372036854775807,3]", "multiply to more than 1099511627776"}},
      {"binary/input_dim_overflow.onnx", {"input 'x'", "multiply to more than 1099511627776"}},
      // Found by the long run: a dim of 2^63 - 1 beside a 0 (no elements, so the element
      // count passed), then padded (UBSan: InferConcat).
      {"text/pad_along_a_huge_dim_of_an_empty_input.onnxtxt", {"input 'x'", "[0,9223372036854775807]", "non-zero dims"}},
      {"binary/pad_along_a_huge_dim_of_an_empty_input.onnx", {"input 'x'", "[0,9223372036854775807]", "non-zero dims"}},
      // The same, found by the long binary run: Split of [2^63 - 1, 6, 0, 0] (UBSan:
      // NumElements in the constant tracker).
      {"binary/split_of_a_huge_dim_beside_a_zero.onnx", {"input 'x'", "[9223372036854775807,6,0,0]", "non-zero dims"}},
      // The long folder run again: InstanceNormalization's scale [2^31 - 1, 255, 2^40, 0]
      // (no elements) reshaped per channel, counted left to right (UBSan: NumElements). Now
      // the non-zero dims of every shape multiply to at most 2^40.
      {"text/instance_norm_scale_of_huge_dims_beside_a_zero.onnxtxt",
       {"input 's'", "[2147483647,255,1099511627776,0]", "non-zero dims"}},
      // The same hole in the first fix of Tile: repeats of an empty dim were unbounded.
      {"text/tile_of_an_empty_dim_overflow.onnxtxt", {"(Tile, opset 17)", "repeats [4, 9223372036854775807]"}},
      // Each tiled dim within bounds, their product not (UBSan: NumElements in the final
      // reshape, before the importer's own check). Seen in review during the long run,
      // and found by the binary fuzzer independently minutes later.
      {"text/tile_result_overflow.onnxtxt", {"(Tile, opset 17)", "repeats [1048576, 1048576] make a result of more than"}},
      {"binary/tile_result_overflow.onnx", {"(Tile, opset 18)", "repeats [536870911, 68719476735] make a result"}},
      // Reshape's target shape multiplied past int64 (UBSan: ResolveReshape).
      {"text/reshape_shape_overflow.onnxtxt", {"(Reshape, opset 17)", "shape [2, 16, 4, 1152921504606846992]"}},
      // Split sizes summed past int64 (UBSan: GraphBuilder::Split).
      {"text/split_sizes_overflow.onnxtxt", {"(Split, opset 17)", "split sizes [2, 9223372036854775807]"}},
      {"binary/split_sizes_overflow.onnx", {"(Split, opset 17)", "do not add up to the dim of size 6"}},
      // Slice and Squeeze of a scalar: the builder took axis 0 of rank 0 (UBSan: reads of an
      // empty vector<bool> and shape).
      {"text/slice_of_a_scalar.onnxtxt", {"(Slice, opset 17)", "rank 1 or more"}},
      {"binary/slice_of_a_scalar.onnx", {"(Slice, opset 13)", "rank 1 or more"}},
      {"text/squeeze_of_a_scalar.onnxtxt", {"(Squeeze, opset 17)", "squeeze axis 0 is out of range for rank 0"}},
      // Arithmetic on attribute and constant values that overflowed int64 (UBSan).
      {"text/slice_step_overflow.onnxtxt", {"(Slice, opset 17)", "steps [9223372036854775807]"}},
      {"text/tile_repeats_overflow.onnxtxt", {"(Tile, opset 17)", "repeats [4611686018427387904, 1]"}},
      {"text/conv_dilation_overflow.onnxtxt", {"(Conv, opset 17)", "dilations [4611686018427387904, 1]"}},
      {"text/pad_negative_overflow.onnxtxt", {"(Pad, opset 17)", "pads [-9223372036854775808, 0]"}},
      {"text/depth_to_space_blocksize_overflow.onnxtxt", {"(DepthToSpace, opset 17)", "not divisible by blocksize"}},
      {"text/onehot_depth_overflow.onnxtxt", {"(OneHot, opset 17)", "depth 9.223372036854776e+18 must be in"}},
      // SoftmaxCrossEntropyLoss of uint8 scores: its LogSoftmax failed and the loss read the
      // shape of the value never built (vector::at in the CI fuzz slice, 2026-11-23).
      {"binary/softmax_cross_entropy_of_uint8_scores.onnx", {"(SoftmaxCrossEntropyLoss, opset 13)", "log_softmax needs a float input"}},
      // ScatterElements into 2^32 data elements: a writer list per element (96 GB) before
      // anything was checked (ASan: allocator out of memory, 2026-11-23).
      {"binary/scatter_elements_into_huge_data.onnx", {"(ScatterElements, opset 17)", "data has 4294967296 elements"}},
      // Hardmax (opset 8) whose axis attribute is a graph: the flattening reshape was not
      // built and its shape was read (vector::at, the text fuzzer, 2026-11-23).
      {"text/hardmax_with_a_graph_for_its_axis.onnxtxt", {"(Hardmax, opset 8)", "attribute 'axis' must be an int, got GRAPH"}},
      // Resize whose nearest_mode attribute is a type: the first axis's gather was not built and
      // the next axis read its dtype (vector::at, the CI fuzz slice from a clean clone, 2026-11-23).
      {"binary/resize_with_a_type_for_its_nearest_mode.onnx", {"(Resize, opset 17)", "attribute 'nearest_mode' must be a string"}},
      // A nearest Resize of one axis to 8257544 elements: its weights, worked out output by
      // output, took 19 s under the sanitizers (a timeout in CI's 10-second folder slice,
      // 2026-11-28).
      {"text/resize_of_an_axis_to_8m_elements.onnxtxt", {"node 'y' (Resize", "from 4 to 8257544: more than 4194304 output elements"}},
      // A Resize from a declared dim of 2^40 to 2^39: in × out overflowed int64 in the weight
      // matrix's size check (UBSan, CI's 10-second binary slice from a clean clone, 2026-11-29).
      {"binary/resize_weight_matrix_overflow.onnx", {"(Resize, opset 17)", "more than 4194304 output elements"}},
      // A Range of 4e9 elements filled a 32 GB constant; it is now an iota, and this graph
      // is refused only for its declared output shape.
      {"text/range_too_long_for_a_constant.onnxtxt", {"output 'y'", "differs from the computed [4000000000]"}},
      // f64 -> int64 conversions of values >= 2^63 (UBSan: Tensor::SetDouble). Both models
      // are valid; ConstantsSaturateAtInt64Max checks their values.
      {"text/cast_to_int64_overflow.onnxtxt", {}},
      {"text/constant_value_int_max.onnxtxt", {}},
      // DequantizeLinear with an axis attribute that is not an int: the builder refused it and
      // the blocked scale's reshape had no value, whose type was then read (std::out_of_range).
      // CI's 10-second slice of the text fuzzer from a clean clone, 2026-12-02.
      {"text/dequantize_with_a_bad_axis_attribute.onnxtxt", {"(DequantizeLinear", "attribute 'axis' must be an int"}},
  };
  return list;
}

// The folder form also loads its data sets, as `tilefuse run DIR --check` does.
Status ImportRegression(const fs::path& path) {
  StatusOr<ImportedModel> model = ImportOnnx(path.string());
  if (!model.ok()) return model.status();
  if (fs::is_directory(path)) {
    StatusOr<std::vector<TestDataSet>> sets = LoadTestDataSets(path.string());
    if (!sets.ok()) return sets.status();
  }
  return Status::Ok();
}

TEST(ImporterFuzzRegressions, EachIsRefusedNamingItsCause) {
  for (const Regression& r : Regressions()) {
    SCOPED_TRACE(r.path);
    Status status = ImportRegression(kRegressionDir / r.path);
    if (r.words.empty()) {
      EXPECT_TRUE(status.ok()) << status.ToString();
      continue;
    }
    ASSERT_FALSE(status.ok());
    for (const std::string& word : r.words)
      EXPECT_NE(status.message().find(word), std::string::npos) << word << " in: " << status.ToString();
  }
}

// Both graphs compute x + INT64_MAX: with x = 0 the reference interpreter gives INT64_MAX,
// exactly (a cast of 1e30 saturates; value_int is copied, not rounded through f64).
TEST(ImporterFuzzRegressions, ConstantsSaturateAtInt64Max) {
  for (const char* path : {"text/cast_to_int64_overflow.onnxtxt", "text/constant_value_int_max.onnxtxt"}) {
    SCOPED_TRACE(path);
    StatusOr<ImportedModel> model = ImportOnnx((kRegressionDir / path).string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    StatusOr<std::vector<Tensor>> outputs = RunReference(model->graph, {Tensor(DType::kI64, {1})});
    ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
    int64_t value = 0;
    std::memcpy(&value, outputs->at(0).data(), sizeof value);
    EXPECT_EQ(value, INT64_MAX);
  }
}

TEST(ImporterFuzzRegressions, EveryFileHasAnExpectation) {
  std::vector<std::string> listed;
  for (const Regression& r : Regressions()) listed.push_back(r.path);
  for (const char* kind : {"text", "binary", "folder"}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(kRegressionDir / kind, ec)) {
      std::string path = std::string(kind) + "/" + entry.path().filename().string();
      EXPECT_NE(std::find(listed.begin(), listed.end(), path), listed.end()) << path << " is not in Regressions()";
    }
  }
}

// The CLI on each refused one (`print`, or `run --check` for a folder, which reads its data
// sets): exit 2 and one "error: " line, never a signal.
TEST(CliFuzzRegressions, EachExitsTwoWithAnError) {
  for (const Regression& r : Regressions()) {
    if (r.words.empty()) continue;
    SCOPED_TRACE(r.path);
    fs::path path = kRegressionDir / r.path;
    testing_cli::CommandResult result = testing_cli::RunTilefuse(
        fs::is_directory(path) ? "run " + testing_cli::Quote(path.string()) + " --check"
                               : "print " + testing_cli::Quote(path.string()));
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
  }
}

}  // namespace
}  // namespace tilefuse
