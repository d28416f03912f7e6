// Checks on input and output paths shared by every reader and writer (graphs, clusters,
// placements, profiles, traces, pictures, checkpoints), and writing a file whole.
//
// Thread safety: pure functions, except that write_file_whole touches the file system (two calls
// for one path may run at once: each leaves its own whole file or fails).
#pragma once

#include <string>
#include <string_view>

namespace dplace {

// Why the file system cannot say what `path` names (following links): "Too many levels of
// symbolic links", "File name too long", "Permission denied" (a directory on the way that may
// not be searched). Empty when it can: the path exists, or simply does not (ENOENT, ENOTDIR).
// std::filesystem's throwing calls on such a path ended the process (filesystem_error).
std::string path_status_problem(const std::string& path);

// Throws FormatError "<path>: is a directory, not a file" when `path` names a directory (a
// std::ifstream opens a directory without complaint on Linux and then reads nothing, so a
// directory was reported as an empty file), and "<path>: cannot open: <reason>" when
// path_status_problem says the path cannot be looked at.
void check_input_path(const std::string& path);

// Writes all of `bytes` to the descriptor `fd`, retrying short writes and EINTR. False on failure,
// with errno set.
bool write_all(int fd, std::string_view bytes);

// Writes `bytes` to `path` whole or not at all. A regular file, or a new one, is written into a
// new file beside it ("<path>.tmp-<pid>-<n>", with the old file's permissions, and its owner and
// group when allowed) that is then renamed over it: a failed write (a full disk, a file-size
// limit, a kill) keeps the previous file, and two runs writing one path leave one whole file, not
// a mix. Symbolic links are followed (the file a link names is replaced or created; the link
// stays). Written in place instead, as an ofstream would: a device, FIFO or pipe (/dev/null,
// /dev/stdout), a file with other hard links, and an existing file that cannot be replaced (a
// directory that refuses new files, a sticky directory holding another user's file, a mount point,
// a name too long for the suffix). Returns "" on success, else the reason ("No space left on
// device").
std::string write_file_whole(const std::string& path, std::string_view bytes);

}  // namespace dplace
