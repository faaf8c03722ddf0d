//===- Frontend.cpp - load, parse and check a .rlhf program ---------------===//

#include "rlhfc/Frontend/Frontend.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace rlhfc;

std::string rlhfc::resolveImport(llvm::StringRef path, llvm::StringRef fromFile,
                                 const FrontendOptions &opts) {
  auto tryDir = [&](llvm::StringRef dir) -> std::string {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, path);
    llvm::SmallString<256> real;
    if (llvm::sys::fs::is_regular_file(p) && !llvm::sys::fs::real_path(p, real))
      return std::string(real);
    return "";
  };
  if (llvm::sys::path::is_absolute(path))
    return tryDir("");
  std::vector<std::string> dirs;
  dirs.push_back(llvm::sys::path::parent_path(fromFile).str());
  if (dirs.back().empty())
    dirs.back() = ".";
  dirs.insert(dirs.end(), opts.includeDirs.begin(), opts.includeDirs.end());
  if (!opts.stdlibDir.empty())
    dirs.push_back(opts.stdlibDir);
  for (const std::string &d : dirs)
    if (std::string r = tryDir(d); !r.empty())
      return r;
  return "";
}

namespace {

struct Loader {
  llvm::SourceMgr &sm;
  mlir::MLIRContext &ctx;
  const FrontendOptions &opts;
  sema::Program &prog;
  std::map<std::string, bool> done; // path -> finished loading
  std::vector<std::pair<std::string, mlir::Location>> stack;
  bool failed = false;

  void load(unsigned bufferId, const std::string &key) {
    auto mod = parseModule(sm, bufferId, ctx, opts.limits);
    if (!mod) {
      failed = true;
      return;
    }
    done[key] = false;
    ast::Module *m = mod.get();
    prog.modules.push_back(std::move(mod));
    for (ast::ImportDecl &imp : m->imports) {
      std::string resolved = resolveImport(imp.path, m->filename, opts);
      if (resolved.empty()) {
        mlir::emitError(imp.loc)
            << "cannot find import \"" << imp.path
            << "\"; searched the importing file's folder, the -I folders and "
               "the standard library"
            << (opts.stdlibDir.empty() ? "" : " (" + opts.stdlibDir + ")");
        failed = true;
        continue;
      }
      imp.resolved = resolved;
      auto it = done.find(resolved);
      if (it != done.end()) {
        if (!it->second) { // still on the stack: a cycle
          auto diag = mlir::emitError(imp.loc)
                      << "import cycle: \"" << imp.path
                      << "\" is already being imported";
          for (auto &[file, loc] : stack)
            diag.attachNote(loc) << "imported from here";
          failed = true;
        }
        continue;
      }
      // Check the size before reading, so a stray huge import is refused
      // without loading it.
      uint64_t size = 0;
      if (!llvm::sys::fs::file_size(resolved, size) &&
          size > opts.limits.maxFileBytes) {
        mlir::emitError(imp.loc)
            << "import \"" << imp.path << "\" is " << (size >> 20)
            << " MiB; rlhfc reads source files of at most "
            << (opts.limits.maxFileBytes >> 20) << " MiB";
        failed = true;
        continue;
      }
      auto buf = llvm::MemoryBuffer::getFile(resolved, /*IsText=*/true);
      if (!buf) {
        mlir::emitError(imp.loc) << "cannot read import \"" << imp.path
                                 << "\": " << buf.getError().message();
        failed = true;
        continue;
      }
      unsigned id = sm.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
      stack.emplace_back(resolved, imp.loc);
      load(id, resolved);
      stack.pop_back();
    }
    done[key] = true;
  }

  /// The stdlib's prelude.rlhf and what it imports, unless the program
  /// imported them itself. A stdlib folder without one has no prelude.
  void loadPrelude() {
    llvm::SmallString<256> path(opts.stdlibDir), real;
    llvm::sys::path::append(path, "prelude.rlhf");
    if (llvm::sys::fs::real_path(path, real)) {
      prog.missingPrelude = path.str().str();
      return;
    }
    if (done.count(std::string(real)))
      return;
    auto buf = llvm::MemoryBuffer::getFile(real, /*IsText=*/true);
    if (!buf) {
      mlir::emitError(mlir::FileLineColLoc::get(&ctx, real, 1, 1))
          << "cannot read the standard library's prelude: "
          << buf.getError().message()
          << "; point --stdlib at an intact standard library";
      failed = true;
      return;
    }
    size_t first = prog.modules.size();
    load(sm.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc()),
         std::string(real));
    for (size_t i = first; i < prog.modules.size(); ++i)
      prog.modules[i]->prelude = true;
  }
};

} // namespace

mlir::LogicalResult rlhfc::loadProgram(llvm::SourceMgr &sm,
                                       mlir::MLIRContext &ctx,
                                       const FrontendOptions &opts,
                                       sema::Program &program) {
  Loader loader{sm, ctx, opts, program, {}, {}, false};
  unsigned mainId = sm.getMainFileID();
  std::string mainName =
      sm.getMemoryBuffer(mainId)->getBufferIdentifier().str();
  llvm::SmallString<256> real;
  std::string key =
      llvm::sys::fs::real_path(mainName, real) ? mainName : std::string(real);
  loader.load(mainId, key);
  if (!loader.failed && opts.prelude && !opts.stdlibDir.empty())
    loader.loadPrelude();
  if (loader.failed)
    return mlir::failure();
  return sema::check(program, ctx);
}

std::unique_ptr<sema::Program> rlhfc::loadProgram(llvm::SourceMgr &sm,
                                                  mlir::MLIRContext &ctx,
                                                  const FrontendOptions &opts) {
  auto prog = std::make_unique<sema::Program>();
  if (mlir::failed(loadProgram(sm, ctx, opts, *prog)))
    return nullptr;
  return prog;
}

std::string rlhfc::defaultStdlibDir(llvm::StringRef flag) {
  if (!flag.empty())
    return flag.str();
  if (const char *env = std::getenv("RLHF_STDLIB"); env && *env)
    return env;
  return RLHF_STDLIB_DIR;
}
