//===- Hover.cpp - what a name in a .rlhf file stands for -----------------===//
//
// Markdown hovers: a model's architecture and parameter count, the planned
// mesh, strategy, time and memory of a model call, the type of a result or
// field, the signature of a built-in, and a run's plan. Functions (`fn`)
// have theirs in Functions.cpp.
//
//===----------------------------------------------------------------------===//

#include "Features.h"
#include "Functions.h"
#include "SourceText.h"

#include "rlhfc/Frontend/Properties.h"

#include "rlhfc/Frontend/Builtins.h"
#include "rlhfc/Frontend/Units.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <array>
#include <cmath>

using namespace rlhfc;
using namespace rlhfc::lsp;
namespace mlsp = mlir::lsp;
using Kind = Occurrence::Kind;
using llvm::formatv;

namespace {

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

/// `v` in thousands, millions, billions or trillions, the largest that
/// keeps it >= 1; `units` name the five scales, from ones up.
std::string scaled(double v, const std::array<const char *, 5> &units) {
  for (int k = 4; k > 0; --k)
    if (double scale = std::pow(1e3, k); v >= scale)
      return formatv("{0:f2}{1}", v / scale, units[k]);
  return formatv("{0}{1}", v, units[0]);
}
std::string shortCount(double n) { return scaled(n, {"", "K", "M", "B", "T"}); }
std::string bytes(double b) {
  return scaled(b, {" B", " KB", " MB", " GB", " TB"});
}

std::string seconds(double s) {
  if (s >= 1)
    return formatv("{0:f3} s", s);
  if (s >= 1e-3)
    return formatv("{0:f3} ms", s * 1e3);
  return formatv("{0:f1} us", s * 1e6);
}

unsigned lineOf(mlir::Location loc) {
  auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc);
  return f ? f.getLine() : 0;
}

/// "12" in the document, "ppo.rlhf:4" in an imported file.
std::string lineIn(const Document &doc, mlir::Location loc) {
  auto f = mlir::dyn_cast<mlir::FileLineColLoc>(loc);
  if (!f)
    return "";
  llvm::StringRef file = f.getFilename().getValue();
  if (doc.isMainFile(file))
    return std::to_string(f.getLine());
  return formatv("{0}:{1}", llvm::sys::path::filename(file), f.getLine());
}

void archTable(const sema::Arch &a, llvm::raw_ostream &os) {
  os << "| layers | hidden | heads | kv heads | ffn | vocab | max seq |\n"
     << "|---:|---:|---:|---:|---:|---:|---:|\n"
     << formatv("| {0} | {1} | {2} | {3} | {4} | {5} | {6} |\n\n", a.layers,
                a.hidden, a.heads, a.kvHeads, a.ffn, a.vocab, a.maxSeq);
}

void paramCount(const sema::Arch &a, bool valueHead, llvm::raw_ostream &os) {
  int64_t n = a.paramCount(valueHead);
  os << formatv("**{0} parameters** ({1}, {2} head{3})", shortCount(double(n)),
                withCommas(n), valueHead ? "value" : "lm",
                a.tieEmbeddings ? ", tied embeddings" : "");
}

void modelHover(const sema::Model &m, llvm::raw_ostream &os) {
  const sema::Arch &a = m.arch;
  os << "**model** `" << m.name << "`";
  if (!a.name.empty() && a.name != m.name)
    os << " : `" << a.name << "`";
  os << "\n\n"
     << (m.trainable ? "trainable" : "frozen") << ", "
     << (m.head == sema::Head::Value ? "value" : "lm") << " head";
  if (m.trainable) {
    const sema::Optimizer &o = m.optimizer;
    os << ", " << o.kind << " (lr " << formatNumber(o.lr);
    if (o.warmupSteps > 0)
      os << ", " << o.warmupSteps << " warmup steps";
    if (o.schedule != "constant")
      os << ", " << o.schedule << " to " << formatNumber(o.minLr);
    os << ")";
  }
  if (!m.checkpoint.empty())
    os << ", checkpoint `" << m.checkpoint << "`";
  if (!m.tokenizer.empty())
    os << ", tokenizer `" << m.tokenizer << "`";
  os << "\n\n";
  archTable(a, os);
  paramCount(a, m.head == sema::Head::Value, os);
}

void entityHover(const Document &doc, const ast::EntityDecl &e,
                 llvm::raw_ostream &os) {
  const sema::Program &p = doc.getProgram();
  switch (e.kind) {
  case ast::EntityKind::Model:
    if (auto it = p.models.find(e.name); it != p.models.end())
      return modelHover(it->second, os);
    break;
  case ast::EntityKind::Arch:
    if (auto it = p.archs.find(e.name); it != p.archs.end()) {
      os << "**arch** `" << e.name << "`\n\n";
      archTable(it->second, os);
      return paramCount(it->second, /*valueHead=*/false, os);
    }
    break;
  case ast::EntityKind::Hardware:
    if (auto it = p.hardware.find(e.name); it != p.hardware.end()) {
      const sema::Hardware &h = it->second;
      os << "**hardware** `" << e.name << "` (per GPU)\n\n"
         << "| bf16 | HBM | HBM bandwidth | NVLink | network | host link |\n"
         << "|---:|---:|---:|---:|---:|---:|\n"
         << formatv("| {0} TFLOP/s | {1} | {2}/s | {3}/s | {4}/s | {5} |",
                    formatNumber(h.bf16Flops / 1e12), bytes(h.hbmBytes),
                    bytes(h.hbmBandwidth), bytes(h.nvlinkBandwidth),
                    bytes(h.networkBandwidth),
                    h.hostBandwidth > 0 ? bytes(h.hostBandwidth) + "/s"
                                        : std::string("not declared"));
      return;
    }
    break;
  case ast::EntityKind::Cluster:
    if (auto it = p.clusters.find(e.name); it != p.clusters.end()) {
      const sema::Cluster &c = it->second;
      os << formatv(
          "**cluster** `{0}`: {1} node{2} x {3} GPUs of `{4}` ({5} GPUs)",
          c.name, c.nodes, c.nodes == 1 ? "" : "s", c.gpusPerNode,
          c.hardware ? c.hardware->name : "?", c.gpus());
      return;
    }
    break;
  case ast::EntityKind::Dataset:
    if (auto it = p.datasets.find(e.name); it != p.datasets.end()) {
      const sema::Dataset &d = it->second;
      os << formatv(
          "**dataset** `{0}`: `{1}`, batch {2}, prompts of {3} tokens", d.name,
          d.path, d.batch, d.maxPromptLen);
      if (d.maxResponseLen)
        os << ", responses of " << d.maxResponseLen;
      os << "\n\n`" << d.type.str() << "`";
      return;
    }
    break;
  }
  // Not checked (the program has errors): say what the declaration is.
  os << "**" << ast::entityKindName(e.kind) << "** `" << e.name << "`";
  if (!e.base.empty())
    os << " : `" << e.base << "`";
}

/// The model, dataset or number a parameter is bound to in a run. Sema records
/// the models of an instance in the order of the algorithm's model parameters.
void boundValue(const ast::AlgorithmDecl &alg, const ast::Param &param,
                const sema::Instance &in, llvm::raw_ostream &os) {
  if (param.type == "dataset" && in.dataset) {
    os << formatv("in the run at line {0}: dataset `{1}`\n\n`{2}`",
                  lineOf(in.loc), in.dataset->name, in.dataset->type.str());
    return;
  }
  if (auto it = in.numbers.find(param.name); it != in.numbers.end()) {
    os << formatv("in the run at line {0}: `{1} = {2}`", lineOf(in.loc),
                  param.name, formatNumber(it->second));
    return;
  }
  if (param.type != "model")
    return;
  size_t k = 0;
  for (const ast::Param &p : alg.params) {
    if (&p == &param)
      break;
    k += p.type == "model";
  }
  if (k < in.models.size()) {
    os << formatv("in the run at line {0}: ", lineOf(in.loc));
    modelHover(*in.models[k], os);
  }
}

const sema::Node *nodeAt(const sema::Instance &in, mlir::Location loc) {
  for (const sema::Node &n : in.nodes)
    if (mlir::Location(n.loc) == loc)
      return &n;
  return nullptr;
}

/// "local[0:4]": the cluster and the GPUs of a mesh, as @place writes it.
std::string meshOf(const llvm::json::Object &report,
                   const llvm::json::Object &call) {
  const llvm::json::Object *cluster = report.getObject("cluster");
  const llvm::json::Object *mesh = call.getObject("mesh");
  int64_t first = mesh ? mesh->getInteger("first_gpu").value_or(0) : 0;
  int64_t gpus = mesh ? mesh->getInteger("gpus").value_or(0) : 0;
  llvm::StringRef name = cluster ? cluster->getString("name").value_or("") : "";
  return formatv("{0}[{1}:{2}]", name, first, first + gpus);
}

void callPlan(const llvm::json::Object &report, const llvm::json::Object &call,
              llvm::raw_ostream &os) {
  const llvm::json::Object *s = call.getObject("strategy");
  const llvm::json::Object *mesh = call.getObject("mesh");
  const llvm::json::Object *mem = call.getObject("memory_per_gpu_bytes");
  if (!s || !mesh || !mem) {
    os << "- runs on the controller\n";
    return;
  }
  auto i = [](const llvm::json::Object *o, llvm::StringRef k) {
    return o->getInteger(k).value_or(0);
  };
  os << formatv("- mesh: `{0}` ({1} GPUs)\n", meshOf(report, call),
                i(mesh, "gpus"));
  os << formatv("- strategy: dp={0} tp={1} pp={2} mbs={3}", i(s, "dp"),
                i(s, "tp"), i(s, "pp"), i(s, "micro_batches"));
  if (s->getBoolean("zero").value_or(false))
    os << ", ZeRO optimizer sharding";
  if (s->getBoolean("recompute").value_or(false))
    os << ", activation recomputation";
  if (s->getBoolean("offload").value_or(false))
    os << ", weights offloaded to host memory";
  if (call.getBoolean("pinned").value_or(false))
    os << " (pinned by @place)";
  os << "\n- predicted time: "
     << seconds(call.getNumber("predicted_time_s").value_or(0));
  if (auto start = call.getNumber("start_s"))
    os << formatv(", from {0} to {1} in the first iteration", seconds(*start),
                  seconds(call.getNumber("end_s").value_or(0)));
  os << "\n- memory per GPU: " << bytes(mem->getNumber("total").value_or(0));
  std::string parts;
  for (auto [key, label] : {std::pair{"weights", "weights"},
                            {"gradients", "gradients"},
                            {"optimizer", "optimizer"},
                            {"activations", "activations"},
                            {"kv_cache", "KV cache"}})
    if (double b = mem->getNumber(key).value_or(0); b > 0)
      parts +=
          (parts.empty() ? "" : ", ") + std::string(label) + " " + bytes(b);
  if (!parts.empty())
    os << " (" << parts << ")";
  os << "\n";
}

/// Why a run has no plan to show.
std::string noPlanReason(Document &doc) {
  if (!doc.isChecked())
    return "not planned: the program has errors";
  std::string err = doc.getPlanError();
  return err.empty() ? "not planned" : "not planned: " + err;
}

void methodHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  const MethodSpec *spec = lookupMethod(o.name);
  const ast::Expr &callee = *o.expr->base;
  llvm::StringRef receiver =
      callee.base && callee.base->kind == ast::Expr::Kind::Name
          ? callee.base->text
          : "";
  os << "**" << receiver << (receiver.empty() ? "" : ".") << o.name << "**";
  if (spec)
    os << ": " << spec->summary;
  os << "\n";
  if (!spec || !o.algorithm)
    return;
  const bool ema = spec->kind == sema::Node::Kind::Ema;
  std::vector<const sema::Instance *> runs = doc.instancesOf(*o.algorithm);
  if (runs.empty()) {
    os << "\nnot planned: "
       << (doc.isChecked() ? "no run uses `" + o.algorithm->name + "`"
                           : std::string("the program has errors"))
       << "\n";
    return;
  }
  for (const sema::Instance *in : runs) {
    const sema::Node *node = nodeAt(*in, *o.nodeLoc);
    os << formatv("\n**plan** in the run at line {0}", lineOf(in->loc));
    if (node && node->model)
      os << " (`" << nodeKindName(node->kind) << "` of model `"
         << node->model->name << "`)";
    os << ":\n\n";
    const RunPlan *plan = doc.getPlan(*in);
    const llvm::json::Object *call = !plan ? nullptr
                                     : ema ? plan->emaAt(*o.nodeLoc)
                                           : plan->callAt(*o.nodeLoc);
    if (!call) {
      os << noPlanReason(doc) << "\n";
      continue;
    }
    if (ema)
      os << formatv("- predicted time: {0}, from {1} to {2} in the first "
                    "iteration: `{3}`'s weights move into `{4}`'s layout and "
                    "blend into its fp32 master weights\n",
                    seconds(call->getNumber("predicted_time_s").value_or(0)),
                    seconds(call->getNumber("start_s").value_or(0)),
                    seconds(call->getNumber("end_s").value_or(0)),
                    call->getString("source").value_or(""),
                    call->getString("target").value_or(""));
    else
      callPlan(plan->report, *call, os);
  }
}

void builtinHover(const Occurrence &o, llvm::raw_ostream &os) {
  const BuiltinSpec *spec = lookupBuiltin(o.name);
  os << "**" << spec->name << "**" << spec->signature << ": " << spec->summary
     << "; runs on the controller\n";
  if (spec->settings.empty())
    return;
  os << "\nsettings:\n";
  for (const SettingSpec &s : spec->settings) {
    os << "- `" << s.name << "`" << settingDefault(s);
    if (*s.help)
      os << ": " << s.help;
    os << "\n";
  }
}

void runHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  const sema::Instance *in = nullptr;
  for (const sema::Instance &i : doc.getProgram().instances)
    if (doc.getText().offsetOf(mlir::cast<mlir::FileLineColLoc>(i.loc)) ==
        o.begin)
      in = &i;
  if (!in)
    return;
  const RunPlan *plan = doc.getPlan(*in);
  os << formatv("\n\n**plan** on `{0}` ({1} GPUs)", in->cluster->name,
                in->cluster->gpus());
  if (!plan) {
    os << ": " << noPlanReason(doc);
    return;
  }
  os << formatv(
      ": predicted iteration time **{0}**",
      seconds(
          plan->report.getNumber("predicted_iteration_time_s").value_or(0)));
  if (auto t = plan->report.getNumber("predicted_eval_batch_time_s"))
    os << formatv("; evaluation on `{0}` **{1}** per batch",
                  plan->report.getString("eval_dataset").value_or(""),
                  seconds(*t));
  os << "\n\n";
  os << "| call | source | mesh | dp | tp | pp | mbs | time | memory per GPU "
        "|\n"
     << "|---|---:|---|---:|---:|---:|---:|---:|---:|\n";
  const llvm::json::Array *calls = plan->report.getArray("calls");
  for (size_t c = 0; calls && c < calls->size(); ++c) {
    const llvm::json::Object *call = (*calls)[c].getAsObject();
    const llvm::json::Object *s = call->getObject("strategy");
    if (!s)
      continue; // host compute
    os << formatv(
        "| {0} | {1} | `{2}` | {3} | {4} | {5} | {6} | {7} | {8} |\n",
        call->getString("name").value_or(""), lineIn(doc, plan->callLocs[c]),
        meshOf(plan->report, *call), s->getInteger("dp").value_or(0),
        s->getInteger("tp").value_or(0), s->getInteger("pp").value_or(0),
        s->getInteger("micro_batches").value_or(0),
        seconds(call->getNumber("predicted_time_s").value_or(0)),
        bytes(call->getObject("memory_per_gpu_bytes")
                  ->getNumber("total")
                  .value_or(0)));
  }
}

void algorithmHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  const ast::AlgorithmDecl *alg = o.algorithm;
  if (!alg)
    return;
  os << "**algorithm** `" << alg->name << "`(";
  for (size_t i = 0; i < alg->params.size(); ++i)
    os << (i ? ", " : "") << alg->params[i].name << ": " << alg->params[i].type;
  os << ")";
  if (!o.isDecl)
    runHover(doc, o, os);
}

void resultHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  os << "**result** `" << o.name << "`";
  for (const sema::Instance *in : doc.instancesOf(*o.algorithm))
    for (const sema::Node &n : in->nodes)
      if (n.name == o.name) {
        os << formatv("\n\nin the run at line {0}: `{1}`", lineOf(in->loc),
                      n.result.str());
        break;
      }
}

void fieldHover(Document &doc, const Occurrence &o, llvm::raw_ostream &os) {
  const ast::Expr &base = *o.expr->base;
  if (base.kind != ast::Expr::Kind::Name || !o.algorithm)
    return;
  os << "**field** `" << base.text << "." << o.name << "`";
  const ast::Param *param = nullptr;
  for (const ast::Param &p : o.algorithm->params)
    if (p.name == base.text)
      param = &p;
  for (const sema::Instance *in : doc.instancesOf(*o.algorithm)) {
    const RecordType *rec = nullptr;
    if (param && param->type == "dataset" && in->dataset)
      rec = &in->dataset->type;
    for (const sema::Node &n : in->nodes)
      if (!param && n.name == base.text)
        rec = &n.result;
    if (const Field *f = rec ? rec->find(o.name) : nullptr)
      os << formatv("\n\nin the run at line {0}: `{1}`", lineOf(in->loc),
                    f->type.str());
  }
}

/// On a property's name in a declaration's block (`steps` in `run ... {
/// steps = 40; }`): what it sets, from Sema's tables.
std::optional<mlsp::Hover> propertyHover(const SourceText &text,
                                         size_t offset) {
  size_t begin = text.wordStart(offset);
  while (begin < offset && !isNameChar(text.text()[begin]))
    ++begin;
  llvm::StringRef name = text.nameAt(begin);
  std::optional<size_t> brace = text.openBrace(begin);
  if (name.empty() || !brace)
    return std::nullopt;
  // The first name of an item: after the `{` or a `;`.
  char before = previousChar(text.text(), begin);
  if (before != '{' && before != ';')
    return std::nullopt;
  llvm::StringRef keyword = text.declarationKeyword(*brace);
  // Required where the block has no base to take it from, as completion
  // marks it.
  const bool based = text.declarationHasBase(*brace);
  for (const PropSpec &p : declarationProps(keyword))
    if (name == p.name) {
      mlsp::Hover hover(text.rangeOf(begin, begin + name.size()));
      hover.contents.value =
          ("**" + name + "** · " + keyword + " property" +
           (p.required && !based ? ", required" : "") + "\n\n" + p.summary)
              .str();
      return hover;
    }
  return std::nullopt;
}

} // namespace

std::optional<mlsp::Hover> rlhfc::lsp::findHover(Document &doc,
                                                 const mlsp::Position &pos) {
  const size_t offset = doc.getText().offsetOf(pos);
  const Occurrence *o = doc.occurrenceAt(offset);
  if (!o)
    return propertyHover(doc.getText(), offset);
  mlsp::Hover hover(doc.getText().rangeOf(o->begin, o->end));
  llvm::raw_string_ostream os(hover.contents.value);
  switch (o->kind) {
  case Kind::Import:
    os << "**import** `" << o->import->path << "`\n\n"
       << (o->import->resolved.empty() ? "not found"
                                       : "`" + o->import->resolved + "`");
    break;
  case Kind::Entity:
    entityHover(doc, *o->entity, os);
    break;
  case Kind::Algorithm:
    algorithmHover(doc, *o, os);
    break;
  case Kind::Param:
    os << "**parameter** `" << o->param->name << "`: " << o->param->type;
    for (const sema::Instance *in : doc.instancesOf(*o->algorithm)) {
      os << "\n\n";
      boundValue(*o->algorithm, *o->param, *in, os);
    }
    break;
  case Kind::Result:
    resultHover(doc, *o, os);
    break;
  case Kind::Method:
    methodHover(doc, *o, os);
    break;
  case Kind::Builtin:
    builtinHover(*o, os);
    break;
  case Kind::Field:
    fieldHover(doc, *o, os);
    break;
  case Kind::Function:
  case Kind::Primitive:
  case Kind::FnLocal:
  case Kind::Output:
    functionHover(doc, *o, os);
    break;
  }
  os.flush();
  if (hover.contents.value.empty())
    return std::nullopt;
  return hover;
}
