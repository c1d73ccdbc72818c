#include "proto_mutator.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tilefuse::fuzzing {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

constexpr int kMaxDepth = 8;

}  // namespace

void ProtoMutator::Collect(Message& message, int depth) {
  messages_.push_back(&message);
  const Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      // Names, not tensor bytes: raw_data can be megabytes.
      std::string scratch;
      auto keep = [this](const std::string& s) {
        if (s.size() <= 64) strings_.push_back(s);
      };
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i)
          keep(reflection->GetRepeatedStringReference(message, field, i, &scratch));
      } else {
        keep(reflection->GetStringReference(message, field, &scratch));
      }
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || depth >= kMaxDepth) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i)
        Collect(*reflection->MutableRepeatedMessage(&message, field, i), depth + 1);
    } else {
      Collect(*reflection->MutableMessage(&message, field), depth + 1);
    }
  }
}

void ProtoMutator::Mutate(Message& root) {
  messages_.clear();
  strings_.clear();
  Collect(root, 0);
  Message& message = *messages_[Below(messages_.size())];
  const auto* descriptor = message.GetDescriptor();
  if (descriptor->field_count() == 0) return;
  MutateField(message, descriptor->field(static_cast<int>(Below(descriptor->field_count()))));
}

void ProtoMutator::MutateField(Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  if (field->is_repeated()) return MutateRepeated(message, field);
  if (Below(8) == 0) return reflection->ClearField(&message, field);
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return SetScalar(message, field, -1);
  // A singular message: copy another of its type from the tree, or create it empty. The
  // copy is taken first: setting a oneof member (TypeProto's tensor_type, ...) destroys
  // the other members, and the source may be one of them or sit inside the target.
  std::vector<Message*> same;
  for (Message* other : messages_)
    if (other->GetDescriptor() == field->message_type() && other != &message) same.push_back(other);
  std::unique_ptr<Message> copy;
  if (!same.empty() && Below(2) == 0) {
    Message* source = same[Below(same.size())];
    copy.reset(source->New());
    copy->CopyFrom(*source);
  }
  Message* target = reflection->MutableMessage(&message, field);
  if (copy) target->CopyFrom(*copy);
}

void ProtoMutator::MutateRepeated(Message& message, const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  int size = reflection->FieldSize(message, field);
  switch (size == 0 ? 0 : Below(4)) {
    case 0:  // add an element: a copy of an existing one, or a fresh one
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        std::unique_ptr<Message> copy;
        if (size > 0 && Below(2) == 0) {
          const Message& source = reflection->GetRepeatedMessage(message, field, static_cast<int>(Below(size)));
          copy.reset(source.New());
          copy->CopyFrom(source);
        }
        Message* added = reflection->AddMessage(&message, field);
        if (copy) added->CopyFrom(*copy);
      } else {
        AddScalar(message, field);
      }
      break;
    case 1:  // remove the last element, or a middle one by swapping it last
      if (size > 1) reflection->SwapElements(&message, field, static_cast<int>(Below(size)), size - 1);
      reflection->RemoveLast(&message, field);
      break;
    case 2:  // swap two elements
      reflection->SwapElements(&message, field, static_cast<int>(Below(size)), static_cast<int>(Below(size)));
      break;
    default:  // change one element in place (messages are reached through Collect)
      if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) SetScalar(message, field, static_cast<int>(Below(size)));
      break;
  }
}

int64_t ProtoMutator::RandomInt(int64_t current) {
  static constexpr int64_t kInteresting[] = {0,         1,          -1,          2,          3,
                                             4,         8,          16,          64,         255,
                                             256,       1 << 16,    INT32_MAX,   INT32_MIN,  int64_t{1} << 31,
                                             int64_t{1} << 32, int64_t{1} << 40, int64_t{1} << 62, INT64_MAX, INT64_MIN};
  switch (Below(4)) {
    case 0: return static_cast<int64_t>(static_cast<uint64_t>(current) + 1);  // wraps, no UB
    case 1: return static_cast<int64_t>(static_cast<uint64_t>(current) - 1);
    case 2: return static_cast<int64_t>(Below(32)) - 4;
    default: return kInteresting[Below(std::size(kInteresting))];
  }
}

double ProtoMutator::RandomDouble(double current) {
  static constexpr double kInteresting[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-30, 1e30, 1e300};
  switch (Below(5)) {
    case 0: return std::numeric_limits<double>::quiet_NaN();
    case 1: return Below(2) ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
    case 2: return current * 2;
    default: return kInteresting[Below(std::size(kInteresting))];
  }
}

std::string ProtoMutator::RandomString(const std::string& current) {
  if (!strings_.empty() && Below(2) == 0) return strings_[Below(strings_.size())];
  switch (Below(4)) {
    case 0: return "";
    case 1: return current.substr(0, Below(current.size() + 1));
    case 2: return current + current;
    default: {
      std::string bytes = current;
      bytes.resize(bytes.size() + 16);
      size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(bytes.data()), current.size(), bytes.size());
      bytes.resize(n);
      return bytes;
    }
  }
}

// index < 0: the singular field.
void ProtoMutator::SetScalar(Message& message, const FieldDescriptor* field, int index) {
  const Reflection* r = message.GetReflection();
  bool one = index < 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      auto v = static_cast<int32_t>(RandomInt(one ? r->GetInt32(message, field) : r->GetRepeatedInt32(message, field, index)));
      one ? r->SetInt32(&message, field, v) : r->SetRepeatedInt32(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = RandomInt(one ? r->GetInt64(message, field) : r->GetRepeatedInt64(message, field, index));
      one ? r->SetInt64(&message, field, v) : r->SetRepeatedInt64(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      auto v = static_cast<uint32_t>(RandomInt(one ? r->GetUInt32(message, field) : r->GetRepeatedUInt32(message, field, index)));
      one ? r->SetUInt32(&message, field, v) : r->SetRepeatedUInt32(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      auto v = static_cast<uint64_t>(RandomInt(static_cast<int64_t>(
          one ? r->GetUInt64(message, field) : r->GetRepeatedUInt64(message, field, index))));
      one ? r->SetUInt64(&message, field, v) : r->SetRepeatedUInt64(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      auto v = static_cast<float>(RandomDouble(one ? r->GetFloat(message, field) : r->GetRepeatedFloat(message, field, index)));
      one ? r->SetFloat(&message, field, v) : r->SetRepeatedFloat(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = RandomDouble(one ? r->GetDouble(message, field) : r->GetRepeatedDouble(message, field, index));
      one ? r->SetDouble(&message, field, v) : r->SetRepeatedDouble(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v = !(one ? r->GetBool(message, field) : r->GetRepeatedBool(message, field, index));
      one ? r->SetBool(&message, field, v) : r->SetRepeatedBool(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* type = field->enum_type();
      int v = type->value(static_cast<int>(Below(type->value_count())))->number();
      one ? r->SetEnumValue(&message, field, v) : r->SetRepeatedEnumValue(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = RandomString(one ? r->GetString(message, field) : r->GetRepeatedString(message, field, index));
      one ? r->SetString(&message, field, v) : r->SetRepeatedString(&message, field, index, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: break;
  }
}

void ProtoMutator::AddScalar(Message& message, const FieldDescriptor* field) {
  const Reflection* r = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_INT64: r->AddInt64(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->AddUInt32(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(&message, field, 0); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->AddBool(&message, field, false); break;
    case FieldDescriptor::CPPTYPE_ENUM: r->AddEnumValue(&message, field, field->enum_type()->value(0)->number()); break;
    case FieldDescriptor::CPPTYPE_STRING: r->AddString(&message, field, ""); break;
    case FieldDescriptor::CPPTYPE_MESSAGE: return;
  }
  SetScalar(message, field, r->FieldSize(message, field) - 1);
}

size_t MutateProtoBytes(Message& scratch, uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  ProtoMutator mutator(seed);
  if (seed % 4 != 0 && scratch.ParseFromArray(data, static_cast<int>(size))) {
    for (uint32_t changes = 1 + (seed >> 8) % 3; changes > 0; --changes) mutator.Mutate(scratch);
    std::string bytes;
    if (scratch.SerializeToString(&bytes) && bytes.size() <= max_size) {
      std::memcpy(data, bytes.data(), bytes.size());
      return bytes.size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace tilefuse::fuzzing
