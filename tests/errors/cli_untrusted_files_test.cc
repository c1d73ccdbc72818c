// An untrusted model and a shared machine, driven through the CLI (docs/security.md):
// external data that leaves the model's folder and cache folders others may write exit 2
// with a message naming the cause; an unsafe default cache is bypassed with a notice; and,
// watched with strace, importing a model opens nothing outside its folder but the system's
// own files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "e2e/cli_test_util.h"
#include "testing/scoped_env.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;
using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void ExpectRefused(const CommandResult& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  for (const std::string& word : words) EXPECT_TRUE(Contains(r.err, word)) << word << " in: " << r.err;
}

// DIR/m/model.onnx: y = x + w, w (float[4]) stored in DIR/m/<location>; and DIR/outside/
// holding a 16-byte file, the right size for w, that the model must never reach.
class CliUntrustedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "m");
    testing_cli::WriteFile(dir_ / "outside/secret.bin", "0123456789abcdef");
  }
  std::string Model(const std::string& location) {
    onnx::ModelProto model = testing_cli::ParseOnnxText(R"(
      <ir_version: 8, opset_import: ["" : 17]>
      g (float[4] x) => (float[4] y) { y = Add (x, w) })");
    onnx::TensorProto* w = model.mutable_graph()->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    onnx::StringStringEntryProto* entry = w->add_external_data();
    entry->set_key("location");
    entry->set_value(location);
    testing_cli::WriteBinaryModel(model, dir_ / "m/model.onnx");
    return dir_ / "m/model.onnx";
  }
  ScratchDir dir_;
};

TEST_F(CliUntrustedModelTest, ALinkToAFileOutsideExitsTwo) {
  fs::create_symlink(dir_ / "outside/secret.bin", dir_ / "m/w.bin");
  ExpectRefused(RunTilefuse("run " + Quote(Model("w.bin"))), {"initializer 'w'", "w.bin", "outside the model's folder"});
}

TEST_F(CliUntrustedModelTest, ALinkedFolderComponentExitsTwo) {
  fs::create_directory_symlink(dir_ / "outside", dir_ / "m/shards");
  ExpectRefused(RunTilefuse("run " + Quote(Model("shards/secret.bin"))), {"initializer 'w'", "outside the model's folder"});
}

TEST_F(CliUntrustedModelTest, AHardLinkExitsTwo) {
  fs::create_hard_link(dir_ / "outside/secret.bin", dir_ / "m/w.bin");
  ExpectRefused(RunTilefuse("run " + Quote(Model("w.bin"))), {"initializer 'w'", "hard links"});
}

// The files a command opened (strace -f -y decodes each descriptor's path), or nullopt
// when strace is missing or cannot trace here.
std::optional<std::vector<std::string>> OpenedFiles(const std::string& args, const ScratchDir& scratch) {
  if (std::system("strace -V >/dev/null 2>&1") != 0) return std::nullopt;
  std::string log = scratch / "strace.log";
  std::string command = "strace -f -y -qq -e trace=open,openat,openat2 -o " + Quote(log) + " " +
                        std::string(TILEFUSE_BINARY) + " " + args + " >/dev/null 2>&1";
  std::system(command.c_str());
  std::ifstream in(log);
  if (!in) return std::nullopt;
  // A successful open ends "= 3</the/path>"; a failed one names the path it tried.
  static const std::regex opened(R"(= \d+<([^>]*)>\s*$)");
  static const std::regex tried(R"(open(?:at2?)?\((?:(?:AT_FDCWD|\d+)<([^>]*)>, )?"([^"]*)\")");
  std::vector<std::string> files;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, opened)) files.push_back(m[1]);
    else if (std::regex_search(line, m, tried))  // relative to the folder of its descriptor
      files.push_back(m[2].str().rfind('/', 0) == 0 || m[1].str().empty() ? m[2].str() : m[1].str() + "/" + m[2].str());
  }
  if (files.empty()) return std::nullopt;  // ptrace refused (a sandbox)
  return files;
}

bool UnderAny(const std::string& path, const std::vector<std::string>& folders) {
  for (const std::string& folder : folders)
    if (path == folder || path.rfind(folder + "/", 0) == 0) return true;
  return false;
}

TEST_F(CliUntrustedModelTest, ImportingOpensNothingOutsideTheModelFolderButSystemFiles) {
  float values[4] = {1, 2, 3, 4};
  testing_cli::WriteFile(dir_ / "m/w.bin", std::string(reinterpret_cast<const char*>(values), sizeof values));
  std::string model = Model("w.bin");
  ScratchDir scratch;
  std::optional<std::vector<std::string>> files = OpenedFiles("print " + Quote(model), scratch);
  if (!files) GTEST_SKIP() << "strace is not installed or cannot trace here (scripts/install-deps.sh installs it)";
  const std::string folder = fs::canonical(dir_ / "m").string();
  const std::vector<std::string> allowed = {folder, "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev"};
  bool read_weights = false;
  for (const std::string& file : *files) {
    EXPECT_TRUE(UnderAny(file, allowed)) << "opened '" << file << "', outside the model's folder " << folder;
    read_weights |= file == folder + "/w.bin";
  }
  EXPECT_TRUE(read_weights) << "the trace must see the external data being read";
  // And a model whose weights link outside: its target is never even tried.
  fs::remove(dir_ / "m/w.bin");
  fs::create_symlink(dir_ / "outside/secret.bin", dir_ / "m/w.bin");
  std::optional<std::vector<std::string>> refused = OpenedFiles("print " + Quote(model), scratch);
  ASSERT_TRUE(refused.has_value());
  for (const std::string& file : *refused) EXPECT_FALSE(Contains(file, "outside")) << "opened " << file;
}

const std::string kExample = std::string(TILEFUSE_SOURCE_DIR) + "/examples/rmsnorm.onnxtxt";

TEST(CliCacheTrust, AWorldWritableCacheFolderTheUserChoseExitsTwoWithTheFix) {
  ScratchDir scratch;
  std::string cache = scratch / "cache";
  fs::create_directory(cache);
  ASSERT_EQ(::chmod(cache.c_str(), 0777), 0);
  ScopedEnv chosen("TILEFUSE_CACHE_DIR", cache.c_str());
  ExpectRefused(RunTilefuse("run " + Quote(kExample) + " --backend cpu"),
                {"kernel cache folder '" + cache + "'", "writable by group or others", "chmod go-w"});
}

TEST(CliCacheTrust, AForeignOwnedCacheFolderExitsTwo) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the cache folder to another uid";
  ScratchDir scratch;
  std::string cache = scratch / "cache";
  fs::create_directory(cache);
  ASSERT_EQ(::chown(cache.c_str(), 12345, 12345), 0);
  ScopedEnv chosen("TILEFUSE_CACHE_DIR", cache.c_str());
  ExpectRefused(RunTilefuse("run " + Quote(kExample) + " --backend cpu"), {cache, "owned by uid 12345"});
}

TEST(CliCacheTrust, AnUnsafeDefaultCacheIsBypassedWithANotice) {
  ScratchDir scratch;
  std::string cache = scratch / "home/.cache/tilefuse";
  fs::create_directories(cache);
  ASSERT_EQ(::chmod(cache.c_str(), 0777), 0);
  ScopedEnv home("HOME", (scratch / "home").c_str());
  ScopedEnv not_chosen("TILEFUSE_CACHE_DIR", nullptr);
  CommandResult r = RunTilefuse("run " + Quote(kExample) + " --backend cpu");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "notice: not using the kernel cache folder '" + cache + "'")) << r.err;
  EXPECT_FALSE(fs::exists(cache + "/v1")) << "nothing was written to the unsafe folder";
}

}  // namespace
}  // namespace tilefuse
