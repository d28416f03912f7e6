#include "dplace/core/files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dplace/core/error.h"
#include "dplace/core/limited_child.h"
#include "dplace/core/scratch_dir.h"

namespace dplace {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The names in `dir`: a write leaves no temporary file behind, whether it succeeds or fails.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = scratch_path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(WriteFileWholeTest, WritesNewAndExistingFilesKeepingPermissions) {
  const fs::path dir = fresh_dir("whole");
  const fs::path file = dir / "a.json";
  EXPECT_EQ(write_file_whole(file.string(), "first"), "");
  EXPECT_EQ(read_all(file), "first");
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(write_file_whole(file.string(), "second"), "");
  EXPECT_EQ(read_all(file), "second");
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"a.json"});
}

TEST(WriteFileWholeTest, AFailedWriteKeepsThePreviousFile) {
  const fs::path dir = fresh_dir("failed");
  const fs::path file = dir / "trace.json";
  ASSERT_EQ(write_file_whole(file.string(), "old content"), "");
  // A file-size limit makes the write fail part-way (EFBIG), as a full disk would (ENOSPC); the
  // file was truncated first and left cut before.
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string why = write_file_whole(file.string(), std::string(100000, 'x'));
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(why, "File too large");
  EXPECT_EQ(read_all(file), "old content");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"trace.json"});
}

// A file the user may write, in a directory where they may not create one, is written in place
// (refusing it would break `-o` where it worked). Root may create files anywhere, so as root the
// write runs in a child process as nobody.
TEST(WriteFileWholeTest, AWritableFileInAClosedDirectoryIsWrittenInPlace) {
  // nobody must reach the directory through the scratch directory (0700).
  fs::permissions(scratch_dir(), fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add);
  const fs::path dir = fresh_dir("closed");
  const fs::path file = dir / "p.json";
  ASSERT_EQ(write_file_whole(file.string(), "old"), "");
  fs::permissions(file, fs::perms::all & ~fs::perms::others_exec & ~fs::perms::group_exec &
                            ~fs::perms::owner_exec);  // 0666
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);  // 0755
  auto check = [&] {
    if (::access(file.c_str(), W_OK) != 0) return 3;  // nobody cannot reach it (TMPDIR in /root)
    if (::access(dir.c_str(), W_OK) == 0) return 2;   // could create files after all
    return write_file_whole(file.string(), "new") == "" ? 0 : 1;
  };
  int status = 0;
  if (::getuid() != 0) {
    fs::permissions(dir, fs::perms::owner_write, fs::perm_options::remove);
    status = check();
    fs::permissions(dir, fs::perms::owner_write, fs::perm_options::add);
  } else {
    status = limited_child::exit_status_in_child([&] {
      if (setgid(65534) != 0 || setuid(65534) != 0) return 3;
      return check();
    });
  }
  if (status == 3) GTEST_SKIP() << "cannot become nobody, or nobody cannot reach the directory";
  EXPECT_EQ(status, 0) << "1: refused, 2: the directory was writable";
  EXPECT_EQ(read_all(file), "new");
}

TEST(WriteFileWholeTest, ALinkIsFollowedAndKept) {
  const fs::path dir = fresh_dir("link");
  const fs::path target = dir / "target.json";
  ASSERT_EQ(write_file_whole(target.string(), "old"), "");
  fs::create_symlink("target.json", dir / "link.json");
  EXPECT_EQ(write_file_whole((dir / "link.json").string(), "new"), "");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "link.json")));
  EXPECT_EQ(read_all(target), "new");
}

// A dangling link's target is created through it (the link stays); a file with other hard links
// is written in place, so that every name shows the new content.
TEST(WriteFileWholeTest, DanglingLinksAndHardLinksAreKept) {
  const fs::path dir = fresh_dir("links");
  fs::create_symlink("made.json", dir / "dangling.json");
  EXPECT_EQ(write_file_whole((dir / "dangling.json").string(), "through the link"), "");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir / "dangling.json")));
  EXPECT_EQ(read_all(dir / "made.json"), "through the link");
  ASSERT_EQ(write_file_whole((dir / "a.json").string(), "old"), "");
  fs::create_hard_link(dir / "a.json", dir / "b.json");
  EXPECT_EQ(write_file_whole((dir / "a.json").string(), "new"), "");
  EXPECT_EQ(read_all(dir / "b.json"), "new");
}

TEST(WriteFileWholeTest, DevicesAreWrittenInPlace) {
  // Renaming a file over /dev/null would replace the device for every process on the machine.
  EXPECT_EQ(write_file_whole("/dev/null", "text"), "");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  if (fs::exists("/dev/full")) {
    EXPECT_EQ(write_file_whole("/dev/full", "text"), "No space left on device");
    EXPECT_TRUE(fs::is_character_file("/dev/full"));
  }
}

TEST(WriteFileWholeTest, DirectoriesAndMissingDirectoriesAreReasons) {
  const fs::path dir = fresh_dir("reasons");
  EXPECT_EQ(write_file_whole(dir.string(), "x"), "it is a directory");
  EXPECT_EQ(write_file_whole((dir / "no" / "x.json").string(), "x"), "No such file or directory");
}

TEST(CheckInputPathTest, PathsTheFileSystemCannotLookAtAreFormatErrors) {
  const fs::path dir = fresh_dir("loops");
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  const std::string loop = (dir / "a").string();
  EXPECT_EQ(path_status_problem(loop), "Too many levels of symbolic links");
  EXPECT_EQ(path_status_problem((dir / "missing").string()), "");
  EXPECT_EQ(path_status_problem((dir / std::string(300, 'n')).string()), "File name too long");
  try {
    check_input_path(loop);
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()), loop + ": cannot open: Too many levels of symbolic links");
  }
  EXPECT_THROW(check_input_path(dir.string()), FormatError);      // a directory
  EXPECT_NO_THROW(check_input_path((dir / "missing").string()));  // the reader says "missing"
}

}  // namespace
}  // namespace dplace
