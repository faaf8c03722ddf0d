//===- rlhfc.cpp - the rlhfc compiler driver ------------------------------===//
//
// .rlhf -> AST -> checked program -> (later stages) MLIR, plans, executables.
// Torch-free: it starts instantly and is safe to run in lit tests.
//
//===----------------------------------------------------------------------===//

#include "UnicodeCarets.h"
#include "rlhfc/Codegen/Codegen.h"
#include "rlhfc/CostModel/FromIR.h"
#include "rlhfc/Frontend/Frontend.h"
#include "rlhfc/Frontend/MLIRGen.h"
#include "rlhfc/Planner/Report.h"
#include "rlhfc/Planner/Timeline.h"
#include "rlhfc/Support/OutputFile.h"
#include "rlhfc/Transforms/FnCode.h"
#include "rlhfc/Transforms/Pipeline.h"

#include "llvm/Support/FormatVariadic.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "rlhf/IR/RLHFDialect.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace llvm;

namespace {

enum class Emit {
  Check,
  AST,
  MLIR,
  PlannedMLIR,
  FnCode,
  Plan,
  Timeline,
  Trace,
  LLVM,
  Obj,
  Exe
};

cl::OptionCategory rlhfcCat("rlhfc options");

cl::opt<std::string> inputFile(cl::Positional,
                               cl::desc("<input .rlhf file, or - for stdin>"),
                               cl::init("-"), cl::cat(rlhfcCat));
/// An enum option whose bad value is answered with the valid ones (LLVM's
/// own parser says only "Cannot find option named 'x'!").
template <typename T> struct ListingParser : cl::parser<T> {
  using cl::parser<T>::parser;
  bool parse(cl::Option &o, StringRef name, StringRef arg, T &value) {
    std::string valid;
    for (unsigned i = 0, e = this->getNumOptions(); i != e; ++i) {
      if (this->getOption(i) == arg) {
        value = this->Values[i].V.getValue();
        return false;
      }
      valid += (valid.empty() ? "" : ", ") + this->getOption(i).str();
    }
    return o.error("'" + arg + "' is not one of " + valid);
  }
};

cl::opt<Emit, false, ListingParser<Emit>>
    emit("emit",
         cl::desc("What to produce (default: check the program only; with "
                  "-o alone, an executable)"),
         cl::init(Emit::Check),
         cl::values(clEnumValN(Emit::Check, "check",
                               "parse and check; print only diagnostics"),
                    clEnumValN(Emit::AST, "ast",
                               "the checked AST and each run's typed dataflow"),
                    clEnumValN(Emit::MLIR, "mlir",
                               "the program in the rlhf MLIR dialect"),
                    clEnumValN(Emit::PlannedMLIR, "planned-mlir",
                               "the dialect after planning: placement, "
                               "reallocations, transfers, costs, schedule"),
                    clEnumValN(Emit::FnCode, "fn-code",
                               "the runtime code of every function call "
                               "(fn), after folding; rlhf-fn-eval runs it"),
                    clEnumValN(Emit::Plan, "plan",
                               "the plan as JSON: per call mesh, strategy, "
                               "time and memory; reallocations; transfers"),
                    clEnumValN(Emit::Timeline, "timeline",
                               "a self-contained HTML page: a Gantt chart "
                               "per GPU and memory over time"),
                    clEnumValN(Emit::Trace, "trace",
                               "the timeline as Chrome trace JSON (open in "
                               "Perfetto or chrome://tracing)"),
                    clEnumValN(Emit::LLVM, "llvm",
                               "LLVM IR of the executable: main, the "
                               "iteration, the plan as constants"),
                    clEnumValN(Emit::Obj, "obj", "a native object file"),
                    clEnumValN(Emit::Exe, "exe",
                               "an executable linked against librlhf_runtime "
                               "(default name: the input's, without .rlhf); "
                               "run it with rlhf-run -n GPUS")),
         cl::cat(rlhfcCat));
cl::opt<std::string>
    outputFile("o",
               cl::desc("Write the output here (default: stdout); without "
                        "--emit or --estimate, build the executable FILE"),
               cl::value_desc("file"), cl::init("-"), cl::cat(rlhfcCat));
cl::list<std::string>
    includeDirs("I", cl::desc("Add a folder to the import search path"),
                cl::value_desc("dir"), cl::Prefix, cl::cat(rlhfcCat));
cl::opt<std::string> stdlibDir("stdlib",
                               cl::desc("Standard library folder (default: the "
                                        "installed one, or $RLHF_STDLIB)"),
                               cl::value_desc("dir"), cl::init(""),
                               cl::cat(rlhfcCat));
cl::opt<bool> noPrelude(
    "no-prelude",
    cl::desc("Do not load the standard library's prelude.rlhf, which makes "
             "its estimators and losses (gae, grpo_adv, ppo_actor_loss, ...) "
             "callable without an import"),
    cl::init(false), cl::cat(rlhfcCat));
rlhfc::PlanningCLOptions planningFlags(rlhfcCat);
cl::opt<bool> estimate("estimate",
                       cl::desc("Print each call's estimated time and per-GPU "
                                "memory, broken into parts"),
                       cl::init(false), cl::cat(rlhfcCat));
cl::opt<std::string> runtimeDir(
    "runtime-dir",
    cl::desc("Folder of librlhf_runtime.so to link against (default: ../lib "
             "next to rlhfc)"),
    cl::value_desc("dir"), cl::init(""), cl::cat(rlhfcCat));
cl::opt<bool> printLocations("print-locations",
                             cl::desc("Print source locations in MLIR output"),
                             cl::init(false), cl::cat(rlhfcCat));
cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check that the diagnostics match the expected-error/warning/note "
             "comments in the input (for tests)"),
    cl::init(false), cl::cat(rlhfcCat));

const char *kOverview =
    "rlhfc: the RLHF workflow compiler\n\n"
    "Compiles an RLHF algorithm written as a .rlhf dataflow program (PPO, "
    "GRPO,\n"
    "ReMax, RLOO, DPO, SFT...) for a GPU cluster.\n\n"
    "Examples:\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf             check a program\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --emit=ast  show the checked AST and "
    "typed dataflow\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --emit=mlir the program in the rlhf "
    "dialect\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --estimate  time and memory of every "
    "call\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --emit=plan         the searched "
    "placement as JSON\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --emit=timeline -o t.html   per-GPU "
    "timeline\n"
    "  rlhfc examples/ppo_llama2_7b.rlhf --emit=plan --planner=heuristic   a "
    "baseline\n"
    "  rlhfc examples/tiny_grpo.rlhf -o tiny_grpo    compile to an "
    "executable\n"
    "  rlhf-run -n 4 ./tiny_grpo --steps 100         ...and train with 4 CPU "
    "workers\n"
    "  rlhfc -I mylib prog.rlhf                      add a folder to the "
    "import path\n\n"
    "Imports are searched in the importing file's folder, then the -I "
    "folders,\n"
    "then the standard library. The language is described in lang/README.md.\n";

const char *programName = "rlhfc";

} // namespace

/// The executable's path for --emit=exe: -o, or the input's name.
std::string exeOutput() {
  if (outputFile != "-")
    return outputFile;
  if (inputFile == "-")
    return "a.out";
  return llvm::sys::path::stem(inputFile).str();
}

/// Lowers a planned module and writes LLVM IR or an object to `os`, or
/// links the executable.
mlir::LogicalResult codegen(mlir::ModuleOp module, raw_ostream &os) {
  namespace cg = rlhfc::codegen;
  if (mlir::failed(cg::lowerToLLVMDialect(module)))
    return mlir::failure();
  llvm::LLVMContext llvmCtx;
  std::string err;
  auto fail = [&](const std::string &what) {
    errs() << "rlhfc: error: " << what << "\n";
    return mlir::failure();
  };
  std::unique_ptr<llvm::Module> m = cg::translateToLLVMIR(module, llvmCtx, err);
  if (!m)
    return fail(err);
  if (emit == Emit::LLVM) {
    m->print(os, nullptr);
    return mlir::success();
  }
  SmallString<128> obj;
  if (std::error_code ec = sys::fs::createTemporaryFile("rlhfc", "o", obj))
    return fail("cannot create a temporary object file: " + ec.message());
  FileRemover removeObj(obj);
  if (mlir::failed(cg::emitObject(*m, obj, err)))
    return fail(err);
  if (emit == Emit::Obj) {
    auto bytes = MemoryBuffer::getFile(obj);
    if (!bytes)
      return fail("cannot read back the object file");
    os << (*bytes)->getBuffer();
    return mlir::success();
  }
  cg::LinkOptions link;
  link.runtimeLibDir =
      runtimeDir.empty()
          ? cg::defaultRuntimeLibDir(programName, (void *)&exeOutput)
          : std::string(runtimeDir);
  if (mlir::failed(cg::linkExecutable(obj, exeOutput(), link, err)))
    return fail(err);
  return mlir::success();
}

/// Everything after reading the input: diagnostics go to `ctx`'s handler,
/// output to `os`.
mlir::LogicalResult compile(llvm::SourceMgr &sm, mlir::MLIRContext &ctx,
                            raw_ostream &os) {
  const rlhfc::PlanningOptions planning = planningFlags.get();
  if (llvm::Error e = rlhfc::checkPlanningOptions(planning)) {
    errs() << "rlhfc: error: " << toString(std::move(e)) << "\n";
    return mlir::failure();
  }
  rlhfc::FrontendOptions opts;
  opts.includeDirs.assign(includeDirs.begin(), includeDirs.end());
  opts.stdlibDir = rlhfc::defaultStdlibDir(stdlibDir);
  opts.prelude = !noPrelude;
  std::unique_ptr<rlhfc::sema::Program> prog =
      rlhfc::loadProgram(sm, ctx, opts);
  if (!prog)
    return mlir::failure();

  rlhfc::cost::Calibration calibration;
  if (!planning.calibration.empty()) {
    auto cal = rlhfc::cost::loadCalibration(planning.calibration);
    if (!cal) {
      errs() << "rlhfc: error: " << toString(cal.takeError()) << "\n";
      return mlir::failure();
    }
    calibration = std::move(*cal);
    // Factors apply by the name of a cluster's hardware; any other name
    // (a misspelt preset, or one the stdlib declares but no cluster runs
    // on, such as H100_SXM for an H200 cluster) is never used.
    std::set<std::string> used;
    std::string known;
    for (const auto &c : prog->clusters)
      if (c.second.hardware && used.insert(c.second.hardware->name).second)
        known += (known.empty() ? "" : ", ") + c.second.hardware->name;
    for (const auto &[name, eff] : calibration)
      if (!used.count(name))
        errs() << "rlhfc: warning: " << planning.calibration << " calibrates '"
               << name << "', which no cluster of this program runs on"
               << (known.empty() ? "" : " (they run on " + known + ")")
               << "; those factors are unused (a preset derived from '" << name
               << "' needs its own entry)\n";
  }
  if (emit == Emit::AST) {
    rlhfc::dumpProgram(*prog, os);
    return mlir::success();
  }
  if (emit == Emit::Check && !estimate)
    return mlir::success();
  auto module = rlhfc::mlirGen(*prog, ctx);
  if (!module)
    return mlir::failure();
  if (estimate)
    return rlhfc::cost::printEstimates(*module, calibration, os);
  mlir::OpPrintingFlags flags;
  if (printLocations)
    flags.enableDebugInfo(true, /*prettyForm=*/false).useLocalScope();
  if (emit == Emit::MLIR) {
    module->print(os, flags);
    os << "\n";
    return mlir::success();
  }
  if (mlir::failed(rlhfc::runPlanningPipeline(*module, planning)))
    return mlir::failure();
  if (emit == Emit::PlannedMLIR) {
    module->print(os, flags);
    os << "\n";
    return mlir::success();
  }
  if (emit == Emit::FnCode)
    return rlhfc::printFnCode(*module, os);
  if (emit == Emit::LLVM || emit == Emit::Obj || emit == Emit::Exe)
    return codegen(*module, os);
  llvm::json::Array plans;
  auto algs = llvm::to_vector(module->getOps<mlir::rlhf::AlgorithmOp>());
  if ((emit == Emit::Timeline || emit == Emit::Trace) && algs.size() > 1)
    // A page or trace shows one algorithm: say which, and how to see the
    // others, rather than drop them unseen.
    mlir::emitWarning(algs[1].getLoc())
        << "--emit=" << (emit == Emit::Timeline ? "timeline" : "trace")
        << " shows the first of " << algs.size() << " runs ('"
        << algs[0].getSymName()
        << "'); keep one run block per file to see another";
  for (auto alg : algs) {
    auto placed = rlhfc::simulatePlaced(alg, calibration, /*record=*/true);
    if (mlir::failed(placed))
      return mlir::failure();
    auto &[p, sim] = *placed;
    std::string title =
        (alg.getSymName() + " (" +
         (inputFile == "-" ? std::string("stdin") : std::string(inputFile)) +
         ")")
            .str();
    if (emit == Emit::Timeline) {
      rlhfc::plan::writeTimelineHtml(p, sim, title, os);
      return mlir::success(); // one algorithm per page
    }
    if (emit == Emit::Trace) {
      rlhfc::plan::writeChromeTrace(p, sim, title, os);
      return mlir::success();
    }
    plans.push_back(rlhfc::plan::planToJson(alg, p, sim));
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plans))) << "\n";
  return mlir::success();
}

int main(int argc, char **argv) {
  InitLLVM x(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "rlhfc " << RLHFC_VERSION << " (MLIR/LLVM " << LLVM_VERSION_STRING
       << ")\n";
  });
  cl::HideUnrelatedOptions(rlhfcCat);
  cl::ParseCommandLineOptions(argc, argv, kOverview);

  // `rlhfc prog.rlhf -o prog` builds prog, as a C compiler would: checking
  // alone writes nothing, so -o would otherwise leave an empty file.
  if (!emit.getNumOccurrences() && outputFile.getNumOccurrences() &&
      outputFile != "-" && !estimate && !verifyDiagnostics)
    emit = Emit::Exe;
  if (estimate && emit.getNumOccurrences() && emit != Emit::Check) {
    errs() << "rlhfc: error: --estimate prints the estimates alone; drop "
              "--emit, or run the two separately\n";
    return 1;
  }
  if (estimate && planningFlags.plannerGiven()) {
    errs() << "rlhfc: error: --estimate prices each call at its @place or "
              "the default placement, without planning; drop --planner, or "
              "see a planner's choice with --emit=plan\n";
    return 1;
  }
  // Without a file, rlhfc reads stdin; at a terminal that would wait in
  // silence for a program typed by hand.
  if (inputFile == "-" && !inputFile.getNumOccurrences() &&
      llvm::sys::Process::StandardInIsUserInput()) {
    errs() << "rlhfc: error: no input file; compile one with 'rlhfc "
              "prog.rlhf -o prog', or pipe a program in with 'rlhfc -' (see "
              "rlhfc --help)\n";
    return 1;
  }
  if (emit == Emit::Exe && outputFile == "-" &&
      outputFile.getNumOccurrences()) {
    errs() << "rlhfc: error: an executable cannot go to stdout; name it "
              "with -o FILE\n";
    return 1;
  }
  // The output must not replace the program it is compiled from.
  if (inputFile != "-") {
    std::string out = emit == Emit::Exe ? exeOutput() : std::string(outputFile);
    if (out != "-" && llvm::sys::fs::equivalent(inputFile, out)) {
      errs() << "rlhfc: error: the output '" << out
             << "' is the input file; name another with -o FILE\n";
      return 1;
    }
  }
  // The linker would say only "cannot open output file".
  if (emit == Emit::Exe) {
    std::string out = exeOutput();
    SmallString<256> dir(llvm::sys::path::parent_path(out));
    if (dir.empty())
      dir = ".";
    std::string why;
    if (llvm::sys::fs::is_directory(out))
      why = "is a folder";
    else if (!llvm::sys::fs::is_directory(dir))
      why = "is in a folder that does not exist";
    else if (llvm::sys::fs::access(dir, llvm::sys::fs::AccessMode::Write))
      why = "is in a folder this user cannot write";
    if (!why.empty()) {
      errs() << "rlhfc: error: cannot write the executable '" << out << "': it "
             << why << "; name another with -o FILE\n";
      return 1;
    }
  }
  if (emit == Emit::Obj && outputFile == "-" &&
      llvm::sys::Process::StandardOutIsDisplayed()) {
    errs() << "rlhfc: error: an object file is binary; write it to a file "
              "with -o FILE.o\n";
    return 1;
  }
  programName = argv[0];
  mlir::DialectRegistry registry;
  rlhfc::codegen::registerCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.getOrLoadDialect<mlir::rlhf::RLHFDialect>();
  // Errors point at .rlhf source; a dump of the IR would only confuse.
  ctx.printOpOnDiagnostic(false);

  std::string err;
  auto buffer = mlir::openInputFile(inputFile, &err);
  if (!buffer) {
    errs() << "rlhfc: error: " << err << "\n";
    return 1;
  }
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(std::move(buffer), SMLoc());

  if (verifyDiagnostics) {
    mlir::SourceMgrDiagnosticVerifierHandler handler(sm, &ctx);
    std::string ignored;
    llvm::raw_string_ostream os(ignored);
    (void)compile(sm, ctx, os);
    return mlir::failed(handler.verify()) ? 1 : 0;
  }
  mlir::SourceMgrDiagnosticHandler handler(sm, &ctx);
  rlhfc::UnicodeCaretHandler carets(sm, &ctx);
  if (emit == Emit::Exe) { // the linker writes the file
    std::string ignored;
    llvm::raw_string_ostream os(ignored);
    return mlir::failed(compile(sm, ctx, os)) ? 1 : 0;
  }
  // Compile into memory first: a failed compile leaves the -o file as it
  // was (the last good plan), not empty or partial.
  std::string text;
  llvm::raw_string_ostream os(text);
  if (mlir::failed(compile(sm, ctx, os)))
    return 1;
  auto out = mlir::openOutputFile(outputFile, &err);
  if (!out) {
    errs() << "rlhfc: error: " << err << "\n";
    return 1;
  }
  out->os() << text;
  if (!rlhfc::keepOutput(*out, outputFile, err)) {
    errs() << "rlhfc: error: " << err << "\n";
    return 1;
  }
  return 0;
}
