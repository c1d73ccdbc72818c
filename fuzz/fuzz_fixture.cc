#include "fuzz_fixture.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tilefuse::fuzzing {

namespace fs = std::filesystem;

namespace {

void RemoveScratchFolder();

// The folder that the planted links of the scratch folder point into (docs/security.md):
// an import must never read it.
std::string MakeOutsideFolder() {
  std::string pattern = (fs::temp_directory_path() / "tilefuse_fuzz_outside_XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    std::perror("tilefuse fuzz: mkdtemp");
    std::abort();
  }
  WriteFile((fs::path(pattern) / "secret.bin").string(), std::string(256, '\xee'));
  return pattern;
}

const std::string& OutsideFolder() {
  static const std::string* folder = new std::string(MakeOutsideFolder());
  return *folder;
}

// Links and a hard link beside the real external-data files, for inputs that name them:
// each must be refused with a message, never read.
void PlantLinks(const fs::path& folder) {
  std::error_code ec;
  fs::create_symlink("weights.bin", folder / "linked.bin", ec);
  fs::create_symlink(fs::path(OutsideFolder()) / "secret.bin", folder / "escape.bin", ec);
  fs::create_directory_symlink("nested", folder / "linked_dir", ec);
  fs::create_directory_symlink(OutsideFolder(), folder / "escape_dir", ec);
  fs::create_hard_link(fs::path(OutsideFolder()) / "secret.bin", folder / "hard.bin", ec);
}

std::string MakeScratchFolder() {
  std::string pattern = (fs::temp_directory_path() / "tilefuse_fuzz_XXXXXX").string();
  if (!::mkdtemp(pattern.data())) {
    std::perror("tilefuse fuzz: mkdtemp");
    std::abort();
  }
  std::string weights(256, '\0');
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i);
  WriteFile((fs::path(pattern) / "weights.bin").string(), weights);
  WriteFile((fs::path(pattern) / "nested" / "weights.bin").string(), weights.substr(0, 64));
  PlantLinks(pattern);
  std::atexit(RemoveScratchFolder);
  return pattern;
}

void RemoveScratchFolder() {
  std::error_code ec;
  fs::remove_all(ScratchFolder(), ec);
  fs::remove_all(OutsideFolder(), ec);
}

}  // namespace

bool IsFixtureFile(const std::string& name) {
  for (std::string_view fixed : kExternalDataFiles)
    if (name == fixed.substr(0, fixed.find('/'))) return true;
  return false;
}

const std::string& ScratchFolder() {
  // Never destroyed: the atexit handler that removes the folder runs after static
  // destructors registered later than itself.
  static const std::string* folder = new std::string(MakeScratchFolder());
  return *folder;
}

void ClearScratchFolder() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(ScratchFolder(), ec)) {
    std::string name = entry.path().filename().string();
    if (!IsFixtureFile(name)) fs::remove_all(entry.path(), ec);
  }
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "tilefuse fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::vector<PackedFile> UnpackFolder(std::string_view packed) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0;;) {
    size_t end = packed.find(kPieceSeparator, start);
    pieces.push_back(packed.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos || static_cast<int>(pieces.size()) == kMaxPieces) break;
    start = end + kPieceSeparator.size();
  }
  std::vector<PackedFile> files = {{"model.onnx", pieces[0]}};
  int counts[4] = {0, 0, 0, 0};
  for (size_t i = 1; i < pieces.size(); ++i) {
    if (pieces[i].empty()) continue;
    int role = static_cast<unsigned char>(pieces[i][0]) % 4;
    std::string name = fmt::format("test_data_set_{}/{}_{}.pb", role / 2, role % 2 == 0 ? "input" : "output",
                                   counts[role]++);
    files.push_back({name, pieces[i].substr(1)});
  }
  return files;
}

void AppendPiece(std::string& packed, int role, std::string_view bytes) {
  packed += kPieceSeparator;
  packed += static_cast<char>(role);
  packed += bytes;
}

}  // namespace tilefuse::fuzzing
