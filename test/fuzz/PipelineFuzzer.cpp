//===- PipelineFuzzer.cpp - libFuzzer target over the whole compile -------===//
//
// What FrontendFuzzer covers, and then everything rlhfc does with a program
// that passes Sema: MLIRGen, the verifier, the planning pipeline (search
// with a small budget), the plan JSON, the Chrome trace and HTML timeline,
// and the lowering to LLVM IR. Besides crashes, it traps when a stage fails
// without an error, or reports an error that has no file:line:col in the
// input: the user would see nothing, or nothing to go on. Functions written
// in .rlhf go the whole way too: the fn code each call of one carries in
// the LLVM IR must be accepted by the runtime's own parser (FnCodeCheck.h)
// and declare what the planned call passes and expects (name, mode, input
// kinds, output names and kinds), or the executable would fail at launch.
//
//===----------------------------------------------------------------------===//

#include "FnCodeCheck.h"
#include "FuzzInput.h"

#include "rlhfc/Codegen/Codegen.h"
#include "rlhfc/Frontend/MLIRGen.h"
#include "rlhfc/Planner/Report.h"
#include "rlhfc/Planner/Timeline.h"
#include "rlhfc/Transforms/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "rlhf/IR/RLHFDialect.h"
#include "rlhf/IR/RLHFOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// Whether `loc` names a line and column of a file.
bool located(mlir::Location loc) {
  if (mlir::isa<mlir::FileLineColLoc>(loc))
    return true;
  if (auto n = mlir::dyn_cast<mlir::NameLoc>(loc))
    return located(n.getChildLoc());
  if (auto c = mlir::dyn_cast<mlir::CallSiteLoc>(loc))
    return located(c.getCallee());
  if (auto f = mlir::dyn_cast<mlir::FusedLoc>(loc))
    return llvm::any_of(f.getLocations(), located);
  return false;
}

/// Whether `msg` is an op's error: "'dialect.op' op ...".
bool isOpError(llvm::StringRef msg) {
  if (!msg.consume_front("'"))
    return false;
  llvm::StringRef name = msg.take_until([](char c) { return c == '\''; });
  return name.contains('.') &&
         llvm::all_of(name,
                      [](char c) {
                        return std::islower(uint8_t(c)) ||
                               std::isdigit(uint8_t(c)) || c == '_' || c == '.';
                      }) &&
         msg.drop_front(name.size()).starts_with("' op ");
}

[[noreturn]] void fail(const char *what, const std::string &detail = "") {
  llvm::errs() << "pipeline fuzzer: " << what << detail << "\n";
  __builtin_trap();
}

using rlhf_fuzz::FnCodeKind;

/// What the fn code of one planned call of a .rlhf function must declare.
struct FnCall {
  std::string name;
  bool loss = false;
  std::vector<FnCodeKind> inputs, outKinds;
  std::vector<std::string> outNames;

  /// Whether fn code declaring `code` fits this call: the same inputs, and
  /// the record's fields as outputs, or for a loss, a scalar `loss` first
  /// (any further outputs are scalar metrics).
  bool accepts(const FnCall &code) const {
    if (name != code.name || loss != code.loss || inputs != code.inputs)
      return false;
    if (!loss)
      return outKinds == code.outKinds && outNames == code.outNames;
    return !code.outNames.empty() && code.outNames[0] == "loss" &&
           llvm::all_of(code.outKinds,
                        [](FnCodeKind k) { return k == FnCodeKind::Scalar; });
  }
  std::string str() const {
    std::string s = name + (loss ? " (loss)" : " (host)") + ", inputs";
    for (FnCodeKind k : inputs)
      s += std::string(" ") + rlhf_fuzz::fnCodeKindName(k);
    s += ", outputs";
    for (auto [n, k] : llvm::zip(outNames, outKinds))
      s += " " + n + ": " + rlhf_fuzz::fnCodeKindName(k);
    return s;
  }
};

/// The kind the runtime gets for a value of type `t`: token ids are i32,
/// everything else is a float (or bool) tensor of its rank.
FnCodeKind kindOf(mlir::Type t) {
  auto shaped = mlir::dyn_cast<mlir::ShapedType>(t);
  if (!shaped || !shaped.hasRank() || shaped.getRank() == 0)
    return FnCodeKind::Scalar;
  if (shaped.getElementType().isInteger(32))
    return FnCodeKind::Tokens;
  return shaped.getRank() == 1 ? FnCodeKind::PerSeq : FnCodeKind::PerToken;
}

/// The calls of .rlhf functions in the planned module.
std::vector<FnCall> fnCalls(mlir::ModuleOp module) {
  namespace r = mlir::rlhf;
  std::vector<FnCall> calls;
  module.walk([&](mlir::Operation *op) {
    FnCall c;
    mlir::OperandRange inputs = op->getOperands();
    if (auto compute = mlir::dyn_cast<r::ComputeOp>(op);
        compute && compute.getKind() == r::ComputeKind::fn) {
      c.name = compute.getFnAttr().getValue().str();
      auto record = mlir::cast<r::RecordType>(compute.getResult().getType());
      for (auto [n, t] : llvm::zip(record.getNames(), record.getTypes())) {
        c.outNames.push_back(n.getValue().str());
        c.outKinds.push_back(kindOf(t));
      }
      inputs = compute.getInputs();
    } else if (auto ts = mlir::dyn_cast<r::TrainStepOp>(op)) {
      c.name = ts.getFn().str();
      c.loss = true;
      c.outNames = {"loss"};
      c.outKinds = {FnCodeKind::Scalar};
      inputs = ts.getInputs();
    } else {
      return;
    }
    for (mlir::Value v : inputs)
      c.inputs.push_back(kindOf(v.getType()));
    calls.push_back(std::move(c));
  });
  return calls;
}

/// Checks the fn code of every rlhf_apply and rlhf_train call in `m`
/// against the runtime's parser and against `planned` (each matched call is
/// taken out of it; an evaluation, which runs the iteration's calls again
/// on held-out rows, takes them out of a copy of its own); returns how many
/// there were. RLHF_FUZZ_FNCODE_DIR
/// names a folder to write each fn code to (the seeds of the fn code
/// target).
unsigned checkFnCode(llvm::Module &m, std::vector<FnCall> &planned) {
  static const char *dumpDir = std::getenv("RLHF_FUZZ_FNCODE_DIR");
  unsigned n = 0;
  const std::vector<FnCall> all = planned;
  for (llvm::Function &fn : m) {
    std::vector<FnCall> evalCalls = all;
    std::vector<FnCall> &pool =
        fn.getName().starts_with("__rlhf_eval_") ? evalCalls : planned;
    for (llvm::BasicBlock &bb : fn)
      for (llvm::Instruction &inst : bb) {
        auto *call = llvm::dyn_cast<llvm::CallInst>(&inst);
        llvm::Function *callee = call ? call->getCalledFunction() : nullptr;
        if (!callee)
          continue;
        // rlhf_apply(prog, code, nin, ins, label);
        // rlhf_train(prog, model, code, nin, ins, ...).
        bool loss = callee->getName() == "rlhf_train";
        if (!loss && callee->getName() != "rlhf_apply")
          continue;
        ++n;
        unsigned at = loss ? 2 : 1;
        std::string entry = callee->getName().str();
        auto *global = llvm::dyn_cast<llvm::GlobalVariable>(
            call->getArgOperand(at)->stripPointerCasts());
        auto *data = global && global->hasInitializer()
                         ? llvm::dyn_cast<llvm::ConstantDataSequential>(
                               global->getInitializer())
                         : nullptr;
        if (!data || !data->isCString())
          fail("the fn code of a call is no constant string: ", entry);
        llvm::StringRef code = data->getAsCString();
        rlhf_fuzz::FnCodeSummary s = rlhf_fuzz::parseFnCode(code);
        if (dumpDir) {
          llvm::SmallString<128> path(dumpDir);
          std::string name =
              s.name.size() <= 64 &&
                      llvm::all_of(s.name,
                                   [](char c) {
                                     return std::isalnum(uint8_t(c)) ||
                                            c == '_';
                                   })
                  ? s.name + "-"
                  : "";
          llvm::sys::path::append(
              path, name + llvm::utohexstr(llvm::xxh3_64bits(code)) + ".fn");
          std::error_code ec;
          llvm::raw_fd_ostream out(path, ec);
          if (!ec)
            out << code;
        }
        if (!s.error.empty())
          fail("the runtime rejects the fn code the compiler emitted: ",
               s.error + "\n" + code.str());
        auto *nin =
            llvm::dyn_cast<llvm::ConstantInt>(call->getArgOperand(at + 1));
        if (!nin || nin->getSExtValue() != int64_t(s.inputs.size()))
          fail("a call passes another number of inputs than its fn code "
               "declares: ",
               entry + " of " + s.name);
        if (s.loss != loss)
          fail("fn code of the wrong mode: ", entry + " of " + s.name);
        FnCall got{s.name, s.loss, s.inputs, s.outKinds, s.outNames};
        auto it = llvm::find_if(
            pool, [&](const FnCall &c) { return c.accepts(got); });
        if (it == pool.end()) {
          std::string want;
          for (const FnCall &c : pool)
            want += "\n  planned: " + c.str();
          fail("fn code that declares no planned call: ",
               got.str() + want + "\n" + code.str());
        }
        pool.erase(it);
      }
  }
  return n;
}

} // namespace

#ifdef RLHF_LIBFUZZER // the replay tool has no mutator to call
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

/// Words that stand in for each other in a valid program, or nearly: a
/// function body with one primitive, operator, kind or shape swapped still
/// parses, and probes Sema's shape and loss rules and the fn code encoder
/// far more often than byte flips do.
const std::vector<std::vector<llvm::StringRef>> &swaps() {
  static const std::vector<std::vector<llvm::StringRef>> classes = {
      {"exp", "log", "log1p", "expm1", "sqrt", "abs", "sigmoid", "softplus"},
      {"min", "max"},
      {"seq_sum", "seq_mean", "seq_var", "seq_std", "group_sum", "group_mean",
       "group_var", "group_std", "batch_sum", "batch_mean", "batch_var",
       "batch_std", "token_sum", "token_mean", "token_var", "token_std"},
      {"last", "next", "mask_of", "broadcast"},
      {"logprobs", "values", "entropy", "score"},
      {"score", "advantages", "returns", "values", "logprobs", "mask", "tokens",
       "number", "int", "loss"},
      {"let", "return"},
      {"<", "<=", ">", ">=", "==", "!="},
      {"+", "-", "*", "/"},
      {"[N]", "[N, S]", "[S]", "[N, P]"}};
  return classes;
}

bool isWordChar(uint8_t c) { return std::isalnum(c) || c == '_'; }

/// Replaces one word of swaps() in `data` by another of its class; 0 when
/// there is none.
size_t swapWord(uint8_t *data, size_t size, size_t maxSize, unsigned seed) {
  struct Hit {
    size_t begin, end;
    const std::vector<llvm::StringRef> *cls;
  };
  std::vector<Hit> hits;
  llvm::StringRef text(reinterpret_cast<char *>(data), size);
  for (size_t i = 0; i < size;) {
    size_t j = i;
    if (isWordChar(data[i])) {
      while (j < size && isWordChar(data[j]))
        ++j;
    } else {
      // Operators: the longest of the class at i; not '->' or '//' or '/*'.
      j = i + 1;
      if (i + 1 < size &&
          (data[i + 1] == '=' || (data[i] == '-' && data[i + 1] == '>') ||
           (data[i] == '/' && (data[i + 1] == '/' || data[i + 1] == '*'))))
        j = i + 2;
      if (size_t close = text.find(']', i);
          data[i] == '[' && close != llvm::StringRef::npos) // a shape
        j = close + 1;
    }
    llvm::StringRef word = text.slice(i, j);
    for (const auto &cls : swaps())
      if (llvm::is_contained(cls, word))
        hits.push_back({i, j, &cls});
    i = j;
  }
  if (hits.empty())
    return 0;
  const Hit &h = hits[seed % hits.size()];
  llvm::StringRef v = (*h.cls)[(seed / hits.size()) % h.cls->size()];
  if (size - (h.end - h.begin) + v.size() > maxSize)
    return 0;
  std::string out(reinterpret_cast<char *>(data), h.begin);
  out += v;
  out.append(reinterpret_cast<char *>(data) + h.end, size - h.end);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

} // namespace

/// Byte mutations rarely keep a program valid, so a quarter of the time
/// replace one number by an extreme or awkward one instead: that is what
/// reaches the planner, the cost model and lowering with odd sizes, batches
/// and meshes. Another quarter swaps a primitive, operator, kind or shape
/// for one of its kin (swapWord), for function bodies.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  if (seed % 4 == 2)
    if (size_t n = swapWord(data, size, maxSize, seed / 4))
      return n;
  static const char *const values[] = {"0",
                                       "1",
                                       "2",
                                       "3",
                                       "7",
                                       "9",
                                       "12",
                                       "1000",
                                       "65536",
                                       "2147483647",
                                       "2147483648",
                                       "4294967296",
                                       "9223372036854775807",
                                       "99999999999999999999",
                                       "0.0",
                                       "1e308",
                                       "1e-308",
                                       "0.5",
                                       "-1"};
  std::vector<std::pair<size_t, size_t>> numbers; // [begin, end)
  for (size_t i = 0; i < size;) {
    if (!std::isdigit(data[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < size && (std::isalnum(data[j]) || data[j] == '.'))
      ++j;
    numbers.push_back({i, j});
    i = j;
  }
  if (numbers.empty() || seed % 4 != 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  auto [b, e] = numbers[(seed / 4) % numbers.size()];
  llvm::StringRef v = values[(seed / 4 / numbers.size()) % std::size(values)];
  if (size - (e - b) + v.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string out(reinterpret_cast<char *>(data), b);
  out += v;
  out.append(reinterpret_cast<char *>(data) + e, size - e);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::DialectRegistry registry;
  rlhfc::codegen::registerCodegenDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.getOrLoadDialect<mlir::rlhf::RLHFDialect>();
  unsigned errors = 0;
  bool checked = false; // past Sema, which should catch every user error
  mlir::ScopedDiagnosticHandler check(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() != mlir::DiagnosticSeverity::Error)
      return mlir::success();
    ++errors;
    if (!located(d.getLocation()))
      fail("an error without a source location: ", d.str());
    // An op verifier speaks IR, not .rlhf ("'rlhf.reduce' op ...", and in
    // function bodies "'arith.addf' op ..."): after Sema it means a check
    // Sema lacks, a plan the planner should not have made, or a body the
    // fn code encoder cannot write.
    if (checked && isOpError(d.str()))
      fail("an IR verifier error reached the user: ", d.str());
    return mlir::success();
  });
  // RLHF_FUZZ_TRACE=1 says how far each input got (to check a corpus).
  static const bool trace = std::getenv("RLHF_FUZZ_TRACE") != nullptr;
  auto failed = [&](const char *stage) {
    if (errors == 0)
      fail("failed without an error: ", stage);
    if (trace)
      llvm::errs() << "stopped with an error in " << stage << "\n";
    return 0;
  };

  llvm::SourceMgr sm;
  std::unique_ptr<rlhfc::sema::Program> prog =
      loadFuzzInput(sm, ctx, data, size);
  if (!prog)
    return failed("frontend");
  checked = true;
  mlir::OwningOpRef<mlir::ModuleOp> module = rlhfc::mlirGen(*prog, ctx);
  if (!module)
    return failed("mlirgen");
  if (mlir::failed(mlir::verify(*module)))
    fail("MLIRGen built IR that does not verify");

  rlhfc::PlanningOptions planning;
  planning.budget = 500; // the polish gets 10x: fast enough to fuzz
  if (mlir::failed(rlhfc::runPlanningPipeline(*module, planning)))
    return failed("planning");
  std::string sink;
  llvm::raw_string_ostream os(sink);
  for (auto alg : module->getOps<mlir::rlhf::AlgorithmOp>()) {
    auto placed = rlhfc::simulatePlaced(alg, {}, /*record=*/true);
    if (mlir::failed(placed))
      return failed("simulate");
    auto &[p, sim] = *placed;
    os << llvm::json::Value(rlhfc::plan::planToJson(alg, p, sim));
    rlhfc::plan::writeChromeTrace(p, sim, "fuzz", os);
    rlhfc::plan::writeTimelineHtml(p, sim, "fuzz", os);
  }
  std::vector<FnCall> planned = fnCalls(*module);
  const size_t numPlanned = planned.size();
  if (mlir::failed(rlhfc::codegen::lowerToLLVMDialect(*module)))
    return failed("lowering");
  llvm::LLVMContext llvmCtx;
  std::string error;
  std::unique_ptr<llvm::Module> ir =
      rlhfc::codegen::translateToLLVMIR(*module, llvmCtx, error);
  if (!ir)
    fail("translation to LLVM IR failed: ", error);
  unsigned fnCodes = checkFnCode(*ir, planned);
  if (trace) {
    llvm::errs() << "compiled to LLVM IR";
    if (numPlanned)
      llvm::errs() << ", " << fnCodes << " of " << numPlanned
                   << " fn calls as fn code the runtime accepts";
    llvm::errs() << "\n";
  }
  return 0;
}
