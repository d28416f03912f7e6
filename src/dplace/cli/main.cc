// dplace: find fast device placements for neural-network graphs. See README.md and docs/cli.md
// for the command surface.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <system_error>

#include "dplace/cli/commands.h"
#include "dplace/cli/workload.h"
#include "dplace/core/error.h"
#include "dplace/core/format.h"

namespace {

// Why what was printed on standard output did not all reach it ("" when it did): a full disk or
// a closed descriptor only shows when the buffer is flushed, and a run whose report was lost must
// not exit 0.
std::string stdout_problem() {
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (flushed && !std::ferror(stdout)) return "";
  return errno != 0 ? std::strerror(errno) : "write error";
}

// Out of memory where no handler can catch it still ends the run as out of memory (exit 3, one
// line): a library's static initializer that throws while LibTorch loads (`ulimit -v 700000`), or
// a destructor that allocates while a parse that ran out of memory unwinds. Anything else aborts
// as before.
[[noreturn]] void terminate_out_of_memory_as_exit_3() {
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::bad_alloc&) {
      static constexpr char kLine[] = "dplace: out of host memory\n";
      static_cast<void>(::write(STDERR_FILENO, kLine, sizeof kLine - 1));
      std::_Exit(3);
    } catch (...) {
    }
  }
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(terminate_out_of_memory_as_exit_3);
  CLI::App app{"dplace: device placement for neural-network computation graphs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dplace 0.1.0");
  dplace::cli::add_list_commands(app);
  dplace::cli::add_info_command(app);
  dplace::cli::add_simulate_command(app);
  dplace::cli::add_place_commands(app);
  dplace::cli::add_pipeline_command(app);
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known |= sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      dplace::print_to_stderr("dplace: unknown command '{}' (commands: {})\n", argv[1], names);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    dplace::print_to_stderr("dplace: {} (see dplace --help)\n", dplace::one_line(e.what()));
    return 2;
  } catch (const dplace::Error& e) {
    // Bad input is one line: warnings about inputs not yet printed are dropped with the run.
    dplace::cli::drop_input_warnings();
    dplace::print_to_stderr("dplace: {}\n", dplace::one_line(e.what()));
    return 2;
  } catch (const dplace::ResourceError& e) {
    dplace::cli::print_input_warnings();  // the report was printed: so are its inputs' warnings
    dplace::print_to_stderr("dplace: {}\n", dplace::one_line(e.what()));
    return 3;
  } catch (const std::bad_alloc&) {
    dplace::cli::drop_input_warnings();
    dplace::print_to_stderr("dplace: out of host memory\n");
    return 3;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the file system cannot look at (a loop of links, a name too long) that no check
    // caught before.
    dplace::cli::drop_input_warnings();
    dplace::print_to_stderr("dplace: {}\n",
                            dplace::one_line(e.path1().string() + ": " + e.code().message()));
    return 2;
  } catch (const std::system_error& e) {
    // fmt::print throws it when standard output refuses a write (a full disk, a closed
    // descriptor); so does a thread that cannot start.
    dplace::cli::drop_input_warnings();
    if (std::ferror(stdout)) {
      dplace::print_to_stderr("dplace: standard output: cannot write ({})\n", e.code().message());
      return 2;
    }
    dplace::print_to_stderr("dplace: {}\n", dplace::one_line(e.what()));
    return 3;
  }
  dplace::cli::print_input_warnings();
  if (const std::string why = stdout_problem(); !why.empty()) {
    dplace::print_to_stderr("dplace: standard output: cannot write ({})\n", why);
    return 2;
  }
  return 0;
}
