#include "frontend/onnx/tensor_proto.h"

#include <gtest/gtest.h>

#include <cstring>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

using onnx_import::TensorFromProto;
using onnx_import::TensorToProto;

TEST(OnnxTensorProtoTest, RawDataRoundTripsEveryDType) {
  for (DType dtype : kAllDTypes) {
    Tensor original = Tensor::FromDoubles(dtype, {2, 2}, {0, 1, 1, 0.5 * (IsFloat(dtype) ? 1 : 0)});
    onnx::TensorProto proto = TensorToProto(original, "t");
    EXPECT_EQ(proto.data_type(), onnx_import::DTypeToOnnx(dtype));
    StatusOr<Tensor> back = TensorFromProto(proto, "");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->dtype(), dtype);
    EXPECT_EQ(back->shape(), (Shape{2, 2}));
    EXPECT_EQ(back->ToDoubles(), original.ToDoubles()) << DTypeName(dtype);
  }
}

TEST(OnnxTensorProtoTest, TypedFields) {
  onnx::TensorProto half;
  half.set_data_type(onnx::TensorProto::FLOAT16);
  half.add_dims(2);
  half.add_int32_data(0x3C00);  // 1.0
  half.add_int32_data(0xC000);  // -2.0
  StatusOr<Tensor> h = TensorFromProto(half, "");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->ToDoubles(), (std::vector<double>{1, -2}));

  onnx::TensorProto flags;
  flags.set_data_type(onnx::TensorProto::BOOL);
  flags.add_dims(3);
  for (int v : {0, 2, 1}) flags.add_int32_data(v);
  StatusOr<Tensor> b = TensorFromProto(flags, "");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ToDoubles(), (std::vector<double>{0, 1, 1}));

  onnx::TensorProto big;
  big.set_data_type(onnx::TensorProto::INT64);
  big.add_int64_data(INT64_MAX);  // rank 0
  StatusOr<Tensor> i = TensorFromProto(big, "");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(onnx_import::TensorToInt64s(*i), (std::vector<int64_t>{INT64_MAX}));

  onnx::TensorProto doubles;
  doubles.set_data_type(onnx::TensorProto::DOUBLE);
  doubles.add_dims(1);
  doubles.add_double_data(0.1);
  StatusOr<Tensor> d = TensorFromProto(doubles, "");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->GetDouble(0), 0.1);
}

TEST(OnnxTensorProtoTest, WrongValueCountNamesTheTensor) {
  onnx::TensorProto proto;
  proto.set_name("w");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(3);
  proto.add_float_data(1);
  StatusOr<Tensor> t = TensorFromProto(proto, "");
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(Contains(t.status().message(), "tensor 'w'")) << t.status().ToString();
}

TEST(OnnxTensorProtoTest, UnsupportedTypesAreUnimplemented) {
  for (int type : std::initializer_list<int>{onnx::TensorProto::STRING, onnx::TensorProto::UINT16, onnx::TensorProto::INT16,
                   onnx::TensorProto::COMPLEX64, 22 /* INT4 */}) {
    onnx::TensorProto proto;
    proto.set_name("odd");
    proto.set_data_type(type);
    StatusOr<Tensor> t = TensorFromProto(proto, "");
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
    EXPECT_TRUE(Contains(t.status().message(), "tensor 'odd'")) << t.status().ToString();
    EXPECT_TRUE(Contains(t.status().message(), onnx_import::OnnxTypeName(type))) << t.status().ToString();
  }
}

onnx::TensorProto ExternalFloats(const std::string& location, int count, int offset) {
  onnx::TensorProto proto;
  proto.set_name("w");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(count);
  proto.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* key, const std::string& value) {
    auto* entry = proto.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(count * 4));
  return proto;
}

TEST(OnnxTensorProtoTest, ExternalDataWithOffsetAndLength) {
  TempDir dir;
  float values[3] = {9, 1.5, -2};
  std::string bytes(4, 'x');
  bytes.append(reinterpret_cast<const char*>(values), sizeof(values));
  WriteBytes(dir.File("data/w.bin"), bytes);
  StatusOr<Tensor> t = TensorFromProto(ExternalFloats("data/w.bin", 2, 8), dir.path());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ToDoubles(), (std::vector<double>{1.5, -2}));
}

TEST(OnnxTensorProtoTest, MissingOrShortExternalDataNamesTensorAndFile) {
  TempDir dir;
  StatusOr<Tensor> missing = TensorFromProto(ExternalFloats("absent.bin", 2, 0), dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(Contains(missing.status().message(), "tensor 'w'")) << missing.status().ToString();
  EXPECT_TRUE(Contains(missing.status().message(), "absent.bin")) << missing.status().ToString();

  WriteBytes(dir.File("short.bin"), "12345");
  StatusOr<Tensor> short_file = TensorFromProto(ExternalFloats("short.bin", 2, 0), dir.path());
  ASSERT_FALSE(short_file.ok());
  EXPECT_TRUE(Contains(short_file.status().message(), "short.bin")) << short_file.status().ToString();
  EXPECT_TRUE(Contains(short_file.status().message(), "has 5 bytes")) << short_file.status().ToString();

  StatusOr<Tensor> escaping = TensorFromProto(ExternalFloats("../secret.bin", 2, 0), dir.path());
  ASSERT_FALSE(escaping.ok());
  EXPECT_TRUE(Contains(escaping.status().message(), "leaves the model's folder")) << escaping.status().ToString();
}

TEST(OnnxTensorProtoTest, SaveAndLoadTensorFiles) {
  TempDir dir;
  Tensor t = Tensor::FromDoubles(DType::kBF16, {3}, {1, -0.5, 256});
  ASSERT_TRUE(SaveTensorProtoFile(t, "x", dir.File("x.pb")).ok());
  StatusOr<Tensor> back = LoadTensorProtoFile(dir.File("x.pb"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->dtype(), DType::kBF16);
  EXPECT_EQ(back->ToDoubles(), t.ToDoubles());

  WriteBytes(dir.File("junk.pb"), "\xff\xff\xff\xff garbage");
  StatusOr<Tensor> junk = LoadTensorProtoFile(dir.File("junk.pb"));
  ASSERT_FALSE(junk.ok());
  EXPECT_TRUE(Contains(junk.status().message(), "junk.pb")) << junk.status().ToString();

  StatusOr<Tensor> none = LoadTensorProtoFile(dir.File("none.pb"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tilefuse::onnx_testing
