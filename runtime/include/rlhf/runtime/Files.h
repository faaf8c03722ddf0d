//===- Files.h - checked writes of small files ------------------*- C++ -*-===//
//
// A checkpoint marker or state file written on a full disk must fail the
// run, not leave an empty file behind it: every write here is checked up to
// the close, and says why it failed.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_RUNTIME_FILES_H
#define RLHF_RUNTIME_FILES_H

#include "rlhf/runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace rlhf {

/// Why the last file operation failed, from errno ("No space left on
/// device"), or "" when errno says nothing.
inline std::string ioReason() {
  return errno ? std::string(": ") + std::strerror(errno) : std::string();
}

/// Throws unless `out` wrote everything to `path` and closed cleanly.
inline void closeChecked(std::ofstream &out, const std::string &path) {
  errno = 0;
  out.close();
  if (!out)
    throw Error("writing '" + path + "' failed" + ioReason());
}

/// Writes `text` to `path` (truncating it), checked.
inline void writeTextFile(const std::string &path, const std::string &text,
                          std::ios::openmode mode = std::ios::trunc) {
  errno = 0;
  std::ofstream out(path, std::ios::out | mode);
  if (!out)
    throw Error("cannot write '" + path + "'" + ioReason());
  out << text;
  closeChecked(out, path);
}

} // namespace rlhf

#endif // RLHF_RUNTIME_FILES_H
