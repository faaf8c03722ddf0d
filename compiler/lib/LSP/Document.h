//===- Document.h - one analysed version of an open .rlhf file --*- C++ -*-===//
//
// A document is loaded exactly as rlhfc loads a file (imports through the
// same search path, Sema over the whole program) from the editor's text,
// which need not be on disk. Its diagnostics, an index of the names in it,
// and on demand its plan, are what every feature reads.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_LIB_LSP_DOCUMENT_H
#define RLHFC_LIB_LSP_DOCUMENT_H

#include "SourceText.h"

#include "rlhfc/LSP/Server.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/JSON.h"

#include <map>

namespace rlhfc::lsp {

/// A diagnostic as the engine reported it, converted once the program is
/// loaded, when locations in imported files can be tied to the main file.
struct RecordedDiagnostic {
  mlir::DiagnosticSeverity severity;
  std::string message;
  mlir::Location loc;
  std::vector<std::pair<mlir::Location, std::string>> notes;
};

/// Records the diagnostics of `ctx` into `out` while alive.
class DiagnosticRecorder {
public:
  DiagnosticRecorder(mlir::MLIRContext &ctx,
                     std::vector<RecordedDiagnostic> &out);

private:
  mlir::ScopedDiagnosticHandler handler;
};

/// A name in the main file and what it stands for.
struct Occurrence {
  enum class Kind {
    Import,    ///< the path of an import
    Entity,    ///< a hardware, arch, cluster, model or dataset
    Algorithm, ///< an algorithm, declared or run
    Param,     ///< an algorithm parameter, declared or used
    Result,    ///< a name bound by a statement, or a use of it
    Method,    ///< the method of a model call: actor.`generate`(...)
    Builtin,   ///< a host function: `gae`(...)
    Field,     ///< a field of a record: g.`seq`
    Function,  ///< a function (`fn`), declared or called
    Primitive, ///< a primitive of function bodies: `exp`(...)
    FnLocal,   ///< a parameter or `let` of a function, declared or used
    Output,    ///< an output of the trained model in a loss: model.`logprobs`
  };
  Kind kind;
  size_t begin = 0, end = 0; ///< byte offsets in the main file
  bool isDecl = false;
  std::string name;
  const ast::ImportDecl *import = nullptr;
  const ast::EntityDecl *entity = nullptr;
  /// Algorithm: the one named; otherwise the one the name is used in.
  const ast::AlgorithmDecl *algorithm = nullptr;
  const ast::Param *param = nullptr;
  /// Result: the binding statement; Method, Builtin: the one holding the call.
  const ast::Stmt *stmt = nullptr;
  /// Method, Builtin: the call; Field: the field expression.
  const ast::Expr *expr = nullptr;
  /// Method, Builtin, Function called from an algorithm: where Sema put the
  /// call's dataflow node (a statement that binds the call is located at its
  /// name).
  std::optional<mlir::Location> nodeLoc;
  /// Function: the one named; FnLocal, Primitive, Output: the one the name is
  /// used in.
  const ast::FnDecl *fn = nullptr;
  /// FnLocal: the parameter, or the `let` that binds the name.
  const ast::FnParam *fnParam = nullptr;
  const ast::FnStmt *let = nullptr;
};

/// The plan of one run, as `rlhfc --emit=plan` reports it.
struct RunPlan {
  const sema::Instance *instance = nullptr;
  llvm::json::Object report;
  /// The location of the op behind each entry of report["calls"].
  std::vector<mlir::Location> callLocs;
  /// The same for report["emas"].
  std::vector<mlir::Location> emaLocs;

  const llvm::json::Object *callAt(mlir::Location loc) const {
    return entryAt("calls", callLocs, loc);
  }
  const llvm::json::Object *emaAt(mlir::Location loc) const {
    return entryAt("emas", emaLocs, loc);
  }

private:
  /// The entry of report[key] whose op (`locs`, in the same order) is at
  /// `loc`.
  const llvm::json::Object *entryAt(llvm::StringRef key,
                                    llvm::ArrayRef<mlir::Location> locs,
                                    mlir::Location loc) const;
};

class Document {
public:
  Document(mlir::MLIRContext &ctx, const ServerOptions &options,
           const mlir::lsp::URIForFile &uri, llvm::StringRef contents);

  mlir::MLIRContext &getContext() const { return ctx; }
  const ServerOptions &getOptions() const { return options; }
  const mlir::lsp::URIForFile &getURI() const { return uri; }
  const SourceText &getText() const { return *mainText; }
  const sema::Program &getProgram() const { return program; }
  /// The main file's syntax tree, or null when it does not parse.
  const ast::Module *getMainModule() const;
  /// Whether the whole program loaded and passed Sema.
  bool isChecked() const { return checked; }

  const ast::EntityDecl *lookupEntity(llvm::StringRef name) const;
  const ast::AlgorithmDecl *lookupAlgorithm(llvm::StringRef name) const;
  /// The function (`fn`) of the program, its imports or the prelude named
  /// `name` (the program's shadows the prelude's).
  const ast::FnDecl *lookupFunction(llvm::StringRef name) const;
  /// Every function, by name.
  const std::map<std::string, const ast::FnDecl *> &getFunctions() const {
    return functions;
  }
  /// The runs of the program that instantiate `alg`, in order.
  std::vector<const sema::Instance *>
  instancesOf(const ast::AlgorithmDecl &alg) const;

  llvm::ArrayRef<Occurrence> getOccurrences() const { return occurrences; }
  /// The innermost name at `offset` (its end included), if any.
  const Occurrence *occurrenceAt(size_t offset) const;

  /// The text of the main file or an imported one, by its path.
  const SourceText *textOf(llvm::StringRef filename) const;
  bool isMainFile(llvm::StringRef filename) const;
  /// An LSP location for a frontend location, spanning `length` bytes, or
  /// the token there when `length` is 0.
  std::optional<mlir::lsp::Location> toLSPLocation(mlir::Location loc,
                                                   size_t length = 0) const;
  mlir::lsp::URIForFile uriFor(llvm::StringRef filename) const;

  /// The frontend's diagnostics, then the planner's once it ran.
  std::vector<mlir::lsp::Diagnostic> getDiagnostics() const;
  /// The planner's alone.
  std::vector<mlir::lsp::Diagnostic> getPlanDiagnostics() const;
  /// Whether the frontend reported an error.
  bool hasFrontendErrors() const;

  /// Runs the planning pipeline on the checked program, once.
  void plan();
  bool isPlanned() const { return planned; }
  /// True once after planning reported diagnostics: they are new to the
  /// client, which has only seen the frontend's.
  bool takeNewPlanDiagnostics();
  /// The plan of a run; plans the document first if needed. Null when the
  /// program is not checked or planning failed.
  const RunPlan *getPlan(const sema::Instance &instance);
  /// The first error the planner reported, or "".
  std::string getPlanError() const;

private:
  mlir::lsp::Diagnostic convert(const RecordedDiagnostic &diag) const;
  /// Where a diagnostic in another file shows in the main file: the run
  /// whose algorithm is in that file, else the import that brings it in.
  std::optional<mlir::Location>
  anchorInMainFile(llvm::StringRef filename) const;

  mlir::MLIRContext &ctx;
  const ServerOptions &options;
  mlir::lsp::URIForFile uri;
  llvm::SourceMgr sourceMgr;
  sema::Program program;
  bool checked = false;
  std::map<std::string, std::unique_ptr<SourceText>> texts; ///< by filename
  const SourceText *mainText = nullptr;
  std::map<std::string, const ast::EntityDecl *> entities;
  std::map<std::string, const ast::AlgorithmDecl *> algorithms;
  std::map<std::string, const ast::FnDecl *> functions;
  std::vector<Occurrence> occurrences;
  std::vector<RecordedDiagnostic> frontendDiags, planDiags;
  bool planned = false, planDiagsTaken = false;
  std::vector<RunPlan> plans;
};

/// Collects the names of the main module (Index.cpp).
std::vector<Occurrence> indexOccurrences(const Document &doc);

} // namespace rlhfc::lsp

#endif // RLHFC_LIB_LSP_DOCUMENT_H
