//===- PipelineFuzzer.cpp - libFuzzer target over the whole compile -------===//
//
// What FrontendFuzzer covers, and then everything rlhfc does with a program
// that passes Sema: MLIRGen, the verifier, the planning pipeline (search
// with a small budget), the plan JSON, the Chrome trace and HTML timeline,
// and the lowering to LLVM IR. Besides crashes, it traps when a stage fails
// without an error, or reports an error that has no file:line:col in the
// input: the user would see nothing, or nothing to go on.
//
//===----------------------------------------------------------------------===//

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
#include "llvm/Support/raw_ostream.h"

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

[[noreturn]] void fail(const char *what, const std::string &detail = "") {
  llvm::errs() << "pipeline fuzzer: " << what << detail << "\n";
  __builtin_trap();
}

} // namespace

#ifdef RLHF_LIBFUZZER // the replay tool has no mutator to call
extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

/// Byte mutations rarely keep a program valid, so half the time replace one
/// number by an extreme or awkward one instead: that is what reaches the
/// planner, the cost model and lowering with odd sizes, batches and meshes.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
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
  if (numbers.empty() || seed % 2)
    return LLVMFuzzerMutate(data, size, maxSize);
  auto [b, e] = numbers[(seed / 2) % numbers.size()];
  llvm::StringRef v = values[(seed / 2 / numbers.size()) % std::size(values)];
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
    // An op verifier speaks IR, not .rlhf: after Sema it means a check
    // Sema lacks or a plan the planner should not have made.
    if (checked && llvm::StringRef(d.str()).starts_with("'rlhf."))
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
  std::unique_ptr<rlhfc::sema::Program> prog = loadFuzzInput(sm, ctx, data, size);
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
  if (mlir::failed(rlhfc::codegen::lowerToLLVMDialect(*module)))
    return failed("lowering");
  llvm::LLVMContext llvmCtx;
  std::string error;
  if (!rlhfc::codegen::translateToLLVMIR(*module, llvmCtx, error))
    fail("translation to LLVM IR failed: ", error);
  if (trace)
    llvm::errs() << "compiled to LLVM IR\n";
  return 0;
}
