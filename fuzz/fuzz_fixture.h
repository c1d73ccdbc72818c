// What the importer fuzz targets share: a private scratch folder the fuzzed files are
// written to, and the packed form of a backend-test folder (one fuzz input holding
// model.onnx and its test_data_set_N/{input,output}_i.pb files).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilefuse::fuzzing {

// One folder per process under $TMPDIR (or /tmp), removed at exit. It holds files that
// external data may name, so those paths are reached with real bytes: weights.bin (256
// bytes) and nested/weights.bin (64 bytes); and links the importer must refuse without
// reading (docs/security.md): linked.bin -> weights.bin, escape.bin -> a 256-byte file
// outside the folder, linked_dir -> nested, escape_dir -> the folder outside, and
// hard.bin, a hard link to that outside file.
inline constexpr std::string_view kExternalDataFiles[] = {
    "weights.bin", "nested/weights.bin", "linked.bin", "escape.bin", "linked_dir/weights.bin",
    "escape_dir/secret.bin", "hard.bin"};
const std::string& ScratchFolder();
// Whether `name` (an entry of the scratch folder) is one of the files above.
bool IsFixtureFile(const std::string& name);
// Replaces the scratch folder's contents (except the external-data files) with none.
void ClearScratchFolder();
void WriteFile(const std::string& path, std::string_view bytes);

// A packed backend-test folder: model.onnx's bytes, then for each data file
// kPieceSeparator, one role byte and the file's bytes. The role byte picks the file:
// role % 4 = 0 input, 1 output of test_data_set_0; 2 input, 3 output of
// test_data_set_1; files of one kind are numbered in order (input_0.pb, input_1.pb...).
// Names are never taken from the input, so nothing is written outside the folder.
inline constexpr std::string_view kPieceSeparator = "\n#tilefuse-piece#";
inline constexpr int kMaxPieces = 16;

struct PackedFile {
  std::string relative_path;  // "model.onnx", "test_data_set_0/input_0.pb", ...
  std::string_view bytes;
};
std::vector<PackedFile> UnpackFolder(std::string_view packed);
// `role` as above; used by the seed-corpus builder.
void AppendPiece(std::string& packed, int role, std::string_view bytes);

}  // namespace tilefuse::fuzzing
