//===- OutputFile.h - Keep an output file, or say why not -------*- C++ -*-===//
#ifndef RLHFC_SUPPORT_OUTPUTFILE_H
#define RLHFC_SUPPORT_OUTPUTFILE_H

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

#include <string>

namespace rlhfc {

/// Flushes `out` and keeps it. A write that failed (a full disk) becomes
/// `error` instead of LLVM's fatal "IO failure" when the stream closes.
inline bool keepOutput(llvm::ToolOutputFile &out, llvm::StringRef path,
                       std::string &error) {
  out.os().flush();
  if (!out.os().has_error()) {
    out.keep();
    return true;
  }
  error = "cannot write '" + path.str() + "': " + out.os().error().message();
  out.os().clear_error();
  // Not kept, the file is removed: right for a partial file, never for a
  // device such as /dev/full (rlhfc may run as root).
  if (!llvm::sys::fs::is_regular_file(path))
    out.keep();
  return false;
}

} // namespace rlhfc

#endif // RLHFC_SUPPORT_OUTPUTFILE_H
