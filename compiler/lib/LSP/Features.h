//===- Features.h - the language features on one document -------*- C++ -*-===//

#ifndef RLHFC_LIB_LSP_FEATURES_H
#define RLHFC_LIB_LSP_FEATURES_H

#include "Document.h"

namespace rlhfc::lsp {

/// Hover.cpp: architecture and parameter count of models and arch presets,
/// the plan of model calls, types of results, signatures of built-ins.
std::optional<mlir::lsp::Hover> findHover(Document &doc,
                                          const mlir::lsp::Position &pos);

/// Definition.cpp: declarations of models, datasets, hardware and arch
/// presets, clusters, algorithms, parameters and results; imported files.
void findDefinitions(Document &doc, const mlir::lsp::Position &pos,
                     std::vector<mlir::lsp::Location> &locations);

/// Symbols.cpp: the declarations of the main file with their properties,
/// parameters and statements.
void findDocumentSymbols(Document &doc,
                         std::vector<mlir::lsp::DocumentSymbol> &symbols);

/// Completion.cpp: model methods after `x.`, fields of records, built-in
/// functions, and the named settings and inputs of the call around `pos`.
mlir::lsp::CompletionList complete(Document &doc,
                                   const mlir::lsp::Position &pos);

} // namespace rlhfc::lsp

#endif // RLHFC_LIB_LSP_FEATURES_H
