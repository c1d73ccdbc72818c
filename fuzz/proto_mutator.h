// A structure-aware mutation for protobuf inputs (ModelProto, TensorProto): one random
// change to one field somewhere in the message tree, through protobuf reflection. Byte
// flips on a serialized protobuf mostly make it unparsable; these changes keep it a
// valid message and reach the importer's checks on dims, types, names and attributes.
#pragma once

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

// libFuzzer's own mutation, callable from a custom mutator.
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace tilefuse::fuzzing {

class ProtoMutator {
 public:
  explicit ProtoMutator(uint32_t seed) : rng_(seed) {}
  // Makes one change: set, clear, add, remove or copy a field of a random message in
  // the tree. Strings are often set to another string of the tree, so that node inputs
  // and outputs get rewired to existing values rather than to random names.
  void Mutate(google::protobuf::Message& root);

 private:
  using Message = google::protobuf::Message;
  using FieldDescriptor = google::protobuf::FieldDescriptor;

  void Collect(Message& message, int depth);
  void MutateField(Message& message, const FieldDescriptor* field);
  void MutateRepeated(Message& message, const FieldDescriptor* field);
  void SetScalar(Message& message, const FieldDescriptor* field, int index);
  void AddScalar(Message& message, const FieldDescriptor* field);
  int64_t RandomInt(int64_t current);
  double RandomDouble(double current);
  std::string RandomString(const std::string& current);
  uint32_t Below(size_t n) { return n == 0 ? 0 : static_cast<uint32_t>(rng_() % n); }

  std::mt19937 rng_;
  std::vector<Message*> messages_;
  std::vector<std::string> strings_;
};

// The libFuzzer custom-mutator body for a protobuf input of type T: three times in four
// a ProtoMutator change when the bytes parse as T, otherwise libFuzzer's own mutation.
size_t MutateProtoBytes(google::protobuf::Message& scratch, uint8_t* data, size_t size, size_t max_size,
                        unsigned int seed);

}  // namespace tilefuse::fuzzing
