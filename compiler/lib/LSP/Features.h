//===- Features.h - the language features on one document -------*- C++ -*-===//

#ifndef RLHFC_LIB_LSP_FEATURES_H
#define RLHFC_LIB_LSP_FEATURES_H

#include "Document.h"

namespace rlhfc::lsp {

/// Hover.cpp: architecture and parameter count of models and arch presets,
/// the plan of model calls, types of results, signatures of built-ins;
/// signatures and documentation of functions, primitives, and the types of
/// their parameters and lets.
std::optional<mlir::lsp::Hover> findHover(Document &doc,
                                          const mlir::lsp::Position &pos);

/// Definition.cpp: declarations of models, datasets, hardware and arch
/// presets, clusters, algorithms, functions, parameters, results and lets;
/// imported files.
void findDefinitions(Document &doc, const mlir::lsp::Position &pos,
                     std::vector<mlir::lsp::Location> &locations);

/// Symbols.cpp: the declarations of the main file with their properties,
/// parameters, statements and lets.
void findDocumentSymbols(Document &doc,
                         std::vector<mlir::lsp::DocumentSymbol> &symbols);

/// Completion.cpp: model methods after `x.`, fields of records, built-in
/// and user functions, and the named settings and inputs of the call around
/// `pos`; in a function body, its parameters and lets, the primitives, and
/// the trained model's outputs after `model.` in a loss.
mlir::lsp::CompletionList complete(Document &doc,
                                   const mlir::lsp::Position &pos);

} // namespace rlhfc::lsp

#endif // RLHFC_LIB_LSP_FEATURES_H
