//===- Diagnostics.cpp - rlhfc's diagnostics as LSP diagnostics -----------===//
//
// The messages are exactly the ones rlhfc prints; only their locations
// change form. A diagnostic inside an imported file is shown in the main
// file at the run or import that leads there, pointing at the real place in
// its related information.
//
//===----------------------------------------------------------------------===//

#include "Document.h"

#include <set>

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;

DiagnosticRecorder::DiagnosticRecorder(mlir::MLIRContext &ctx,
                                       std::vector<RecordedDiagnostic> &out)
    : handler(&ctx, [&out](mlir::Diagnostic &diag) {
        RecordedDiagnostic d{
            diag.getSeverity(), diag.str(), diag.getLocation(), {}};
        for (mlir::Diagnostic &note : diag.getNotes())
          d.notes.emplace_back(note.getLocation(), note.str());
        out.push_back(std::move(d));
      }) {}

static mlsp::DiagnosticSeverity severityOf(mlir::DiagnosticSeverity s) {
  switch (s) {
  case mlir::DiagnosticSeverity::Error:
    return mlsp::DiagnosticSeverity::Error;
  case mlir::DiagnosticSeverity::Warning:
    return mlsp::DiagnosticSeverity::Warning;
  case mlir::DiagnosticSeverity::Remark:
  case mlir::DiagnosticSeverity::Note:
    break;
  }
  return mlsp::DiagnosticSeverity::Information;
}

/// The files each module imports, by the module's filename.
static std::map<std::string, std::vector<std::string>>
importGraph(const sema::Program &program) {
  std::map<std::string, std::vector<std::string>> graph;
  for (const auto &m : program.modules)
    for (const ast::ImportDecl &imp : m->imports)
      if (!imp.resolved.empty())
        graph[m->filename].push_back(imp.resolved);
  return graph;
}

std::optional<mlir::Location>
Document::anchorInMainFile(llvm::StringRef filename) const {
  const ast::Module *main = getMainModule();
  if (!main)
    return std::nullopt;
  auto fileOf = [](mlir::Location loc) -> llvm::StringRef {
    if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
      return f.getFilename().getValue();
    return "";
  };
  for (const auto &run : main->runs)
    if (const ast::AlgorithmDecl *alg = lookupAlgorithm(run->algorithm))
      if (fileOf(alg->loc) == filename)
        return run->loc;
  auto graph = importGraph(program);
  for (const ast::ImportDecl &imp : main->imports) {
    std::vector<std::string> work{imp.resolved};
    std::set<std::string> seen;
    while (!work.empty()) {
      std::string f = work.back();
      work.pop_back();
      if (f == filename)
        return imp.loc;
      if (!seen.insert(f).second)
        continue;
      for (const std::string &next : graph[f])
        work.push_back(next);
    }
  }
  return std::nullopt;
}

mlsp::Diagnostic Document::convert(const RecordedDiagnostic &diag) const {
  mlsp::Diagnostic out;
  out.source = "rlhfc";
  out.severity = severityOf(diag.severity);
  out.message = diag.message;
  std::vector<mlsp::DiagnosticRelatedInformation> related;
  std::optional<mlsp::Location> where = toLSPLocation(diag.loc);
  if (where && where->uri == uri) {
    out.range = where->range;
  } else {
    // The user's own call into that file is the place to fix: a note "in
    // the call of ..." in the main file, else any note there, else the run
    // or import that leads to the file.
    std::optional<mlsp::Range> noted;
    for (const auto &[loc, message] : diag.notes) {
      std::optional<mlsp::Location> l = toLSPLocation(loc);
      if (!l || l->uri != uri)
        continue;
      if (llvm::StringRef(message).starts_with("in the call")) {
        noted = l->range;
        break;
      }
      if (!noted)
        noted = l->range;
    }
    if (noted)
      out.range = *noted;
    else if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(diag.loc))
      if (auto anchor = anchorInMainFile(f.getFilename().getValue()))
        if (auto a = toLSPLocation(*anchor))
          out.range = a->range;
    if (where)
      related.emplace_back(*where, diag.message);
  }
  for (const auto &[loc, message] : diag.notes) {
    mlsp::Location noteLoc;
    noteLoc.uri = uri;
    if (auto l = toLSPLocation(loc))
      noteLoc = *l;
    related.emplace_back(noteLoc, message);
  }
  if (!related.empty())
    out.relatedInformation = std::move(related);
  return out;
}

std::vector<mlsp::Diagnostic> Document::getDiagnostics() const {
  std::vector<mlsp::Diagnostic> out;
  for (const RecordedDiagnostic &d : frontendDiags)
    out.push_back(convert(d));
  for (const RecordedDiagnostic &d : planDiags)
    out.push_back(convert(d));
  return out;
}

std::vector<mlsp::Diagnostic> Document::getPlanDiagnostics() const {
  std::vector<mlsp::Diagnostic> out;
  for (const RecordedDiagnostic &d : planDiags)
    out.push_back(convert(d));
  return out;
}

bool Document::hasFrontendErrors() const {
  return llvm::any_of(frontendDiags, [](const RecordedDiagnostic &d) {
    return d.severity == mlir::DiagnosticSeverity::Error;
  });
}
