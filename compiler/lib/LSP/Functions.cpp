//===- Functions.cpp - what the server knows of `fn` declarations ---------===//

#include "Functions.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

// Sema's own signatures, so that hovers read like its errors.
#include "FnCheck.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace rlhfc;
using namespace rlhfc::lsp;
using Kind = Occurrence::Kind;
using llvm::formatv;

namespace {

// lang/README.md, 6.4; Sema's FnEval::modelOutput.
const ModelOutputSpec kModelOutputs[] = {
    {"logprobs", "lm", "[N, S]",
     "the log-probability of each token of `seq` under the trained model"},
    {"entropy", "lm", "[N, S]",
     "the entropy of the trained model's next-token distribution at each "
     "position"},
    {"values", "value", "[N, S]",
     "the trained model's value estimate at each token"},
    {"score", "value", "[N]", "the trained model's score of each sequence"},
};

// lang/README.md, 6.1; the kinds of FnCheck.cpp.
const FnTypeSpec kFnTypes[] = {
    {"tokens", "[N, S]", "token ids of sequences"},
    {"mask", "[N, S]", "a per-token mask: 1 at the generated tokens"},
    {"logprobs", "[N, S]", "per-token log-probabilities"},
    {"values", "[N, S]", "per-token value estimates"},
    {"returns", "[N, S]", "per-token returns"},
    {"score", "[N]", "one value per sequence"},
    {"advantages", "[N]",
     "advantages, per sequence ([N]) or per token ([N, S])"},
    {"number", "",
     "a number known before the run; with a shape, plain "
     "values of no particular kind"},
    {"int", "", "an integer known before the run"},
    {"loss", "", "a loss that trains a model: actor.train(f(...))",
     /*result=*/true},
};

mlir::FileLineColLoc fileLoc(mlir::Location loc) {
  return mlir::dyn_cast<mlir::FileLineColLoc>(loc);
}

/// `s` on one line: each run of whitespace becomes one space.
std::string oneLine(llvm::StringRef s) {
  std::string out;
  bool space = false;
  for (char c : s.trim()) {
    if (llvm::isSpace(c)) {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  return out;
}

const FnTypeSpec *lookupType(llvm::StringRef name) {
  for (const FnTypeSpec &t : kFnTypes)
    if (name == t.name)
      return &t;
  return nullptr;
}

const sema::Node *nodeAt(const sema::Instance &in, mlir::Location loc) {
  for (const sema::Node &n : in.nodes)
    if (mlir::Location(n.loc) == loc)
      return &n;
  return nullptr;
}

void declHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  const ast::FnDecl &d = *o.fn;
  os << "**fn** `" << d.name << signatureOf(d) << "`";
  if (std::string text = docOf(doc, d); !text.empty())
    os << "\n\n" << text;
  if (auto f = fileLoc(d.loc); f && !doc.isMainFile(f.getFilename()))
    os << formatv("\n\ndeclared in `{0}:{1}`",
                  llvm::sys::path::filename(f.getFilename().getValue()),
                  f.getLine());
  // Called from an algorithm: the record it gives in each run.
  if (!o.algorithm || !o.nodeLoc)
    return;
  for (const sema::Instance *in : doc.instancesOf(*o.algorithm)) {
    const sema::Node *n = nodeAt(*in, *o.nodeLoc);
    auto run = fileLoc(in->loc);
    if (n && run && n->builtin == d.name && n->kind == sema::Node::Kind::Host)
      os << formatv("\n\nin the run at line {0}: `{1}`", run.getLine(),
                    n->result.str());
  }
}

void localHover(const Document &doc, const Occurrence &o,
                llvm::raw_ostream &os) {
  if (o.let) {
    os << "**let** `" << o.let->name << " = " << letValueText(doc, *o.let)
       << "`";
    return;
  }
  const ast::FnParam &p = *o.fnParam;
  os << "**parameter** `" << p.name << "`: `" << paramTypeText(p) << "`";
  if (p.type.kind == "number")
    os << "\n\n"
       << (p.type.dims.empty() ? "a number known before the run"
                               : "plain values of no particular kind");
  else if (const FnTypeSpec *t = lookupType(p.type.kind))
    os << "\n\n" << t->summary;
}

} // namespace

std::string rlhfc::lsp::typeText(const ast::FnType &t) {
  return t.dims.empty() ? t.kind
                        : t.kind + "[" + llvm::join(t.dims, ", ") + "]";
}

std::string rlhfc::lsp::paramTypeText(const ast::FnParam &p) {
  std::string s = typeText(p.type);
  const ast::Expr *e = p.fallback.get();
  if (!e)
    return s;
  bool negative = e->kind == ast::Expr::Kind::Neg;
  if (negative)
    e = e->base.get();
  if (e && e->kind == ast::Expr::Kind::Number)
    s += " = " + std::string(negative ? "-" : "") + formatNumber(e->number);
  return s;
}

std::string rlhfc::lsp::signatureOf(const ast::FnDecl &d) {
  return sema::FnChecker::signature(d);
}

bool rlhfc::lsp::isLoss(const ast::FnDecl &d) {
  return sema::FnChecker::isLoss(d);
}

std::string rlhfc::lsp::docOf(const Document &doc, const ast::FnDecl &d) {
  auto f = fileLoc(d.loc);
  const SourceText *text = f ? doc.textOf(f.getFilename()) : nullptr;
  if (!text)
    return "";
  // Above the `fn` keyword, which may be on an earlier line than the name.
  return text->commentAbove(text->previousWordStart(text->offsetOf(f)));
}

std::string rlhfc::lsp::letValueText(const Document &doc,
                                     const ast::FnStmt &let) {
  const SourceText &text = doc.getText();
  size_t begin = text.offsetOf(fileLoc(let.loc));
  llvm::StringRef s = text.text().slice(begin, text.itemEnd(begin));
  size_t eq = s.find('=');
  return eq == llvm::StringRef::npos ? ""
                                     : oneLine(s.drop_front(eq + 1).rtrim(";"));
}

const ast::FnDecl *rlhfc::lsp::enclosingFunction(const Document &doc,
                                                 size_t offset) {
  const ast::Module *m = doc.getMainModule();
  if (!m)
    return nullptr;
  const SourceText &text = doc.getText();
  for (const auto &f : m->functions) {
    size_t begin = text.previousWordStart(text.offsetOf(fileLoc(f->loc)));
    if (begin <= offset && offset < text.itemEnd(begin))
      return f.get();
  }
  return nullptr;
}

size_t rlhfc::lsp::bodyBegin(const SourceText &text, const ast::FnDecl &d) {
  // The first `{` outside the parameters' and results' parentheses.
  int depth = 0;
  size_t found = text.text().size();
  text.scanCode(text.offsetOf(fileLoc(d.loc)), text.text().size(),
                [&](size_t i, char c) {
                  if (c == '(' || c == '[')
                    ++depth;
                  else if (c == ')' || c == ']')
                    --depth;
                  else if (c == '{' && depth == 0) {
                    found = i;
                    return false;
                  }
                  return true;
                });
  return found;
}

llvm::ArrayRef<ModelOutputSpec> rlhfc::lsp::modelOutputs() {
  return kModelOutputs;
}

const ModelOutputSpec *rlhfc::lsp::lookupModelOutput(llvm::StringRef name) {
  for (const ModelOutputSpec &m : kModelOutputs)
    if (name == m.name)
      return &m;
  return nullptr;
}

llvm::ArrayRef<FnTypeSpec> rlhfc::lsp::fnTypes() { return kFnTypes; }

void rlhfc::lsp::functionHover(Document &doc, const Occurrence &o,
                               llvm::raw_ostream &os) {
  switch (o.kind) {
  case Kind::Function:
    return declHover(doc, o, os);
  case Kind::Primitive:
    if (const ControlSpec *c = lookupControl(o.name))
      os << "**" << o.name << "** `" << o.name << c->spec.signature << "`\n\n"
         << c->spec.summary;
    else if (const FnPrimitiveSpec *p = lookupFnPrimitive(o.name))
      os << "**primitive** `" << p->name << p->signature << "`\n\n"
         << p->summary;
    return;
  case Kind::FnLocal:
    return localHover(doc, o, os);
  case Kind::Output:
    if (const ModelOutputSpec *m = lookupModelOutput(o.name))
      os << "**model." << m->name << "** `(seq: tokens[N, S]) -> " << m->shape
         << "`\n\n"
         << m->summary << ", with its gradient; "
         << (llvm::StringRef(m->head) == "lm" ? "an" : "a") << " " << m->head
         << " head's output";
    return;
  default:
    return;
  }
}
