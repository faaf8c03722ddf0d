//===- ASTDump.cpp - `rlhfc --emit=ast` -----------------------------------===//

#include "rlhfc/Frontend/Frontend.h"
#include "rlhfc/Frontend/Units.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include "llvm/Support/Path.h"

using namespace rlhfc;
using namespace rlhfc::ast;

namespace {

std::string where(mlir::Location loc) {
  if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
    return llvm::formatv("{0}:{1}:{2}", llvm::sys::path::filename(f.getFilename()),
                         f.getLine(), f.getColumn());
  return "?";
}

/// 6.74B, 1.3M: parameter counts the way model cards write them.
std::string params(int64_t n) {
  if (n >= 1e9)
    return llvm::formatv("{0:f2}B", n / 1e9);
  if (n >= 1e6)
    return llvm::formatv("{0:f2}M", n / 1e6);
  return std::to_string(n);
}


class Dumper {
public:
  explicit Dumper(llvm::raw_ostream &os) : os(os) {}

  void module(const Module &m) {
    line(0) << "Module " << llvm::sys::path::filename(m.filename) << "\n";
    for (const ImportDecl &i : m.imports)
      line(1) << "Import \"" << i.path << "\" <" << where(i.loc) << ">\n";
    for (auto &e : m.entities) {
      line(1) << "Decl " << entityKindName(e->kind) << " " << e->name;
      if (!e->base.empty())
        os << " : " << e->base;
      os << " <" << where(e->loc) << ">\n";
      for (const Property &p : e->props) {
        line(2) << "Property " << p.name;
        if (p.value) {
          os << " =\n";
          expr(*p.value, 3);
        } else {
          os << " (flag)\n";
        }
      }
    }
    for (auto &a : m.algorithms) {
      line(1) << "Algorithm " << a->name << " <" << where(a->loc) << ">\n";
      for (const Param &p : a->params)
        line(2) << "Param " << p.name << ": " << p.type << "\n";
      for (const Stmt &s : a->body) {
        line(2) << "Stmt";
        if (!s.target.empty())
          os << " " << s.target << " =";
        os << " <" << where(s.loc) << ">\n";
        for (const Annotation &an : s.annotations) {
          line(3) << "Annotation @" << an.name << "\n";
          for (const Arg &arg : an.args)
            argument(arg, 4);
        }
        expr(*s.expr, 3);
      }
    }
    for (auto &r : m.runs) {
      line(1) << "Run " << r->algorithm << " <" << where(r->loc) << ">\n";
      for (const Arg &arg : r->args)
        argument(arg, 2);
      for (const Property &p : r->props) {
        line(2) << "Setting " << p.name << " =\n";
        if (p.value)
          expr(*p.value, 3);
      }
    }
  }

  void instance(const sema::Instance &in) {
    line(0) << "Instance " << in.algorithm << " <" << where(in.loc) << ">";
    if (in.cluster)
      os << " cluster=" << in.cluster->name << " gpus=" << in.cluster->gpus();
    os << " steps=" << in.settings.steps << " seed=" << in.settings.seed
       << " save_interval=" << in.settings.saveInterval;
    if (in.settings.staleness)
      os << " staleness=" << in.settings.staleness;
    if (in.settings.evalDataset)
      os << " eval=" << in.settings.evalDataset->name
         << " eval_interval=" << in.settings.evalInterval
         << " eval_samples=" << in.settings.evalSamples;
    os << "\n";
    for (const sema::Model *m : in.models)
      line(1) << "Model " << m->name << " arch=" << m->arch.name
              << " params=" << params(m->arch.paramCount(m->head == sema::Head::Value))
              << (m->trainable ? " trainable" : " frozen")
              << (m->head == sema::Head::Value ? " head=value" : " head=lm") << "\n";
    if (in.dataset)
      line(1) << "Dataset " << in.dataset->name << " " << in.dataset->type.str()
              << "\n";
    for (size_t i = 0; i < in.nodes.size(); ++i) {
      const sema::Node &n = in.nodes[i];
      line(1) << "Node %" << i << " " << sema::nodeKindName(n.kind);
      if (n.model)
        os << " " << n.model->name;
      if (n.source)
        os << " <- " << n.source->name;
      if (!n.builtin.empty())
        os << " " << n.builtin;
      if (!n.name.empty())
        os << " -> " << n.name;
      os << " <" << where(n.loc) << ">\n";
      for (const sema::Node::Input &inp : n.inputs)
        line(2) << "in " << inp.param << " = "
                << (inp.producer < 0 ? std::string("dataset")
                                     : "%" + std::to_string(inp.producer))
                << "." << inp.field << " : " << inp.type.str() << "\n";
      for (auto &[k, v] : n.attrs)
        line(2) << k << " = " << formatNumber(v) << "\n";
      for (auto &[k, v] : n.textAttrs)
        line(2) << k << " = \"" << v << "\"\n";
      if (n.placement)
        line(2) << llvm::formatv("place gpus=[{0}:{1}] dp={2} tp={3} pp={4} mbs={5}\n",
                                 n.placement->firstGpu,
                                 n.placement->firstGpu + n.placement->numGpus,
                                 n.placement->dp, n.placement->tp, n.placement->pp,
                                 n.placement->microBatches);
      if (!n.result.fields.empty())
        line(2) << "out " << n.result.str() << "\n";
      if (in.filter && in.filter->node == int(i))
        line(2) << llvm::formatv(
            "filter_groups by %{0}.{1}: groups of {2}, max_rounds={3} "
            "min_std={4} expected_rounds={5}{6}; later nodes read the kept "
            "rows\n",
            i, in.filter->field, in.filter->group, in.filter->maxRounds,
            formatNumber(in.filter->minStd),
            formatNumber(in.filter->expectedRounds),
            in.filter->genBatch > 0
                ? " gen_batch=" + std::to_string(in.filter->genBatch)
                : std::string());
    }
  }

private:
  llvm::raw_ostream &line(unsigned depth) {
    for (unsigned i = 0; i < depth; ++i)
      os << "  ";
    return os;
  }

  void argument(const Arg &a, unsigned depth) {
    line(depth) << "Arg" << (a.name.empty() ? "" : " " + a.name) << "\n";
    expr(*a.value, depth + 1);
  }

  void expr(const Expr &e, unsigned depth) {
    switch (e.kind) {
    case Expr::Kind::Number:
      line(depth) << "Number " << formatNumber(e.number) << e.text << "\n";
      return;
    case Expr::Kind::String:
      line(depth) << "String \"" << e.text << "\"\n";
      return;
    case Expr::Kind::Bool:
      line(depth) << "Bool " << (e.boolean ? "true" : "false") << "\n";
      return;
    case Expr::Kind::Name:
      line(depth) << "Name " << e.text << "\n";
      return;
    case Expr::Kind::Field:
      line(depth) << "Field ." << e.text << "\n";
      expr(*e.base, depth + 1);
      return;
    case Expr::Kind::Call:
      line(depth) << "Call <" << where(e.loc) << ">\n";
      expr(*e.base, depth + 1);
      for (const Arg &a : e.args)
        argument(a, depth + 1);
      return;
    case Expr::Kind::Slice:
      line(depth) << "Slice\n";
      expr(*e.base, depth + 1);
      expr(*e.lo, depth + 1);
      expr(*e.hi, depth + 1);
      return;
    case Expr::Kind::Neg:
      line(depth) << "Neg\n";
      expr(*e.base, depth + 1);
      return;
    case Expr::Kind::Binary:
      line(depth) << "Binary " << e.text << "\n";
      expr(*e.base, depth + 1);
      expr(*e.hi, depth + 1);
      return;
    case Expr::Kind::List:
      line(depth) << "List\n";
      for (auto &x : e.elems)
        expr(*x, depth + 1);
      return;
    }
  }

  llvm::raw_ostream &os;
};

} // namespace

void rlhfc::dumpProgram(const sema::Program &p, llvm::raw_ostream &os) {
  Dumper d(os);
  if (!p.modules.empty())
    d.module(*p.modules.front());
  for (const sema::Instance &in : p.instances)
    d.instance(in);
}
