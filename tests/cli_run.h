// Running the dplace binary from tests: its exit code and output, and the one-line error check.
// Header-only: each test target defines DPLACE_BINARY and DPLACE_TEST_DATA_DIR (dplace_test).
//
// Thread safety: run() uses fixed file names in a per-process directory; one call at a time.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dplace/core/scratch_dir.h"

namespace dplace::cli_testing {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The per-process scratch directory (core/scratch_dir.h), removed when the test exits.
inline const fs::path& temp_dir() { return scratch_dir(); }

// The files run() sends the standard output and error to.
inline fs::path out_file() { return temp_dir() / "out.txt"; }
inline fs::path err_file() { return temp_dir() / "err.txt"; }

// Runs `dplace ARGS STDOUT_TO STDERR_TO </dev/null` through the shell, where the two redirections
// are shell words (">/dev/full", "2>&-"); out and err are read from out_file() and err_file().
// `env`, when given, goes in front of the binary: NAME=VALUE assignments (e.g.
// "DPLACE_RL_TORCH_MODULE=/x.so"), an env(1) call ("env -u NAME") or shell commands ending in ';'.
inline RunResult run_redirected(const std::string& args, const std::string& stdout_to,
                                const std::string& stderr_to, const std::string& env = "") {
  fs::remove(out_file());
  fs::remove(err_file());
  const std::string cmd = (env.empty() ? "" : env + " ") + std::string(DPLACE_BINARY) + " " + args +
                          " " + stdout_to + " " + stderr_to + " </dev/null";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_all(out_file());
  r.err = read_all(err_file());
  return r;
}

// Runs `dplace ARGS` with its output in out_file() and err_file() (run_redirected).
inline RunResult run(const std::string& args, const std::string& env = "") {
  return run_redirected(args, ">" + out_file().string(), "2>" + err_file().string(), env);
}

inline std::string data(const std::string& rel) {
  return std::string(DPLACE_TEST_DATA_DIR) + "/" + rel;
}

// Bad input: exit 2, exactly one line on stderr that mentions `needle`.
inline void expect_one_line_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(r.err.rfind("dplace: ", 0), 0u) << r.err;
}

}  // namespace dplace::cli_testing
