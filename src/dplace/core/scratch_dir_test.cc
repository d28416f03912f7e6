#include "dplace/core/scratch_dir.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dplace {
namespace {

namespace fs = std::filesystem;

TEST(ScratchDirTest, PathsLieInOneDirectoryOfThisProcess) {
  const fs::path a = scratch_path("a.json");
  EXPECT_EQ(a.parent_path(), scratch_dir());
  EXPECT_EQ(fs::path(scratch_path("b.json")).parent_path(), scratch_dir());
  EXPECT_TRUE(fs::is_directory(scratch_dir()));
  EXPECT_EQ(scratch_dir().parent_path(), fs::temp_directory_path());
  EXPECT_NE(scratch_dir().filename().string().find("-" + std::to_string(::getpid()) + "-"),
            std::string::npos);
}

TEST(ScratchDirTest, GoesAwayWithEverythingInIt) {
  fs::path dir;
  {
    const scratch_detail::ScratchDir scratch;
    dir = scratch.path();
    fs::create_directories(dir / "sub");
    std::ofstream(dir / "sub" / "f.txt") << "x";
    ASSERT_TRUE(fs::exists(dir / "sub" / "f.txt"));
  }
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ScratchDirTest, AForkedChildDoesNotRemoveItsParentsDirectory) {
  const scratch_detail::ScratchDir scratch;
  std::ofstream(scratch.path() / "f.txt") << "x";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    scratch.~ScratchDir();  // what a normal exit of the child would run
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(fs::exists(scratch.path() / "f.txt"));
}

}  // namespace
}  // namespace dplace
