//===- Definition.cpp - go to the declaration of a name -------------------===//

#include "Features.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;
using Kind = Occurrence::Kind;

void rlhfc::lsp::findDefinitions(Document &doc, const mlsp::Position &pos,
                                 std::vector<mlsp::Location> &locations) {
  const Occurrence *o = doc.occurrenceAt(doc.getText().offsetOf(pos));
  if (!o)
    return;
  auto declaredAt = [&](mlir::Location loc, llvm::StringRef name) {
    if (auto l = doc.toLSPLocation(loc, name.size()))
      locations.push_back(*l);
  };
  switch (o->kind) {
  case Kind::Import:
    // The whole imported file, from its start.
    if (!o->import->resolved.empty())
      locations.emplace_back(doc.uriFor(o->import->resolved), mlsp::Range());
    return;
  case Kind::Entity:
    return declaredAt(o->entity->loc, o->entity->name);
  case Kind::Algorithm:
    if (o->algorithm)
      declaredAt(o->algorithm->loc, o->algorithm->name);
    return;
  case Kind::Param:
    return declaredAt(o->param->loc, o->param->name);
  case Kind::Result:
    return declaredAt(o->stmt->loc, o->stmt->target);
  case Kind::Function:
    // In the main file or an imported one (the stdlib's estimators).
    return declaredAt(o->fn->loc, o->fn->name);
  case Kind::FnLocal:
    if (o->let)
      return declaredAt(o->let->loc, o->let->name);
    return declaredAt(o->fnParam->loc, o->fnParam->name);
  case Kind::Method:
  case Kind::Builtin:
  case Kind::Field:
  case Kind::Primitive:
  case Kind::Output:
    return; // built into the language
  }
}
