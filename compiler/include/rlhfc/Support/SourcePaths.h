//===- SourcePaths.h - paths relative to the .rlhf file ---------*- C++ -*-===//
//
// A path written in a .rlhf file (a dataset, a checkpoint, a tokenizer, an
// hf("dir") import) is relative to the file that writes it. Sema resolves
// imports at compile time and the lowering the rest, with the same rule.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_SUPPORT_SOURCEPATHS_H
#define RLHFC_SUPPORT_SOURCEPATHS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <string>

namespace rlhfc {

/// The first file position a location holds, through names and fusions.
inline mlir::FileLineColLoc fileLineColOf(mlir::Location loc) {
  if (auto f = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return f;
  if (auto n = llvm::dyn_cast<mlir::NameLoc>(loc))
    return fileLineColOf(n.getChildLoc());
  if (auto fused = llvm::dyn_cast<mlir::FusedLoc>(loc))
    for (mlir::Location l : fused.getLocations())
      if (mlir::FileLineColLoc f = fileLineColOf(l))
        return f;
  return {};
}

/// The file a location points into, or "" when it points nowhere.
inline std::string fileOf(mlir::Location loc) {
  mlir::FileLineColLoc f = fileLineColOf(loc);
  return f ? f.getFilename().str() : "";
}

/// "file:line:col" of a location, as diagnostics print it, or "" when it
/// points nowhere.
inline std::string positionOf(mlir::Location loc) {
  mlir::FileLineColLoc f = fileLineColOf(loc);
  return f ? f.getFilename().str() + ":" + std::to_string(f.getLine()) + ":" +
                 std::to_string(f.getColumn())
           : "";
}

/// `path` made absolute against the directory of the file `loc` is in.
inline std::string resolveFrom(mlir::Location loc, llvm::StringRef path) {
  llvm::SmallString<256> out(path);
  if (llvm::sys::path::is_absolute(out))
    return out.str().str();
  std::string src = fileOf(loc);
  if (src.empty())
    return out.str().str();
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(src));
  llvm::sys::path::append(dir, path);
  llvm::sys::fs::make_absolute(dir);
  llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  return dir.str().str();
}

} // namespace rlhfc

#endif // RLHFC_SUPPORT_SOURCEPATHS_H
