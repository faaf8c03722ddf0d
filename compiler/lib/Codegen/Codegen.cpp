//===- Codegen.cpp - LLVM dialect, LLVM IR, object file, executable -------===//

#include "rlhfc/Codegen/Codegen.h"
#include "rlhfc/Support/OutputFile.h"

#include "rlhfc/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

void rlhfc::codegen::registerCodegenDialects(DialectRegistry &registry) {
  registry.insert<LLVM::LLVMDialect, func::FuncDialect, scf::SCFDialect,
                  arith::ArithDialect, cf::ControlFlowDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

LogicalResult rlhfc::codegen::lowerToLLVMDialect(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createRLHFLowerToRuntime());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

std::unique_ptr<llvm::Module>
rlhfc::codegen::translateToLLVMIR(ModuleOp module, llvm::LLVMContext &llvmCtx,
                                  std::string &error) {
  auto m = translateModuleToLLVMIR(module, llvmCtx, "rlhf_program");
  if (!m) {
    error = "cannot translate the LLVM dialect to LLVM IR";
    return nullptr;
  }
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  m->setTargetTriple(llvm::sys::getDefaultTargetTriple());
  return m;
}

LogicalResult rlhfc::codegen::emitObject(llvm::Module &m, llvm::StringRef path,
                                         std::string &error) {
  const std::string triple = m.getTargetTriple();
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return failure();
  llvm::TargetOptions opts;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, "generic", "", opts, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Default));
  m.setDataLayout(tm->createDataLayout());

  // -O2 over the generated module (mostly constant folding of the calls'
  // arguments; the work happens in the runtime).
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm.get());
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);

  std::error_code ec;
  llvm::ToolOutputFile out(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write '" + path.str() + "': " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, out.os(), nullptr,
                              llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(m);
  return success(keepOutput(out, path, error));
}

std::string rlhfc::codegen::defaultRuntimeLibDir(const char *argv0,
                                                 void *mainAddr) {
  std::string exe = llvm::sys::fs::getMainExecutable(argv0, mainAddr);
  llvm::SmallString<256> dir(llvm::sys::path::parent_path(exe));
  llvm::sys::path::append(dir, "..", "lib");
  llvm::sys::path::remove_dots(dir, /*remove_dot_dot=*/true);
  return dir.str().str();
}

LogicalResult rlhfc::codegen::linkExecutable(llvm::StringRef object,
                                             llvm::StringRef output,
                                             const LinkOptions &opts,
                                             std::string &error) {
  llvm::SmallString<256> lib(opts.runtimeLibDir);
  llvm::sys::path::append(lib, "librlhf_runtime.so");
  if (!llvm::sys::fs::exists(lib)) {
    error = "cannot find the runtime library '" + lib.str().str() +
            "'; build it (scripts/build.sh rlhf_runtime) or pass --runtime-dir";
    return failure();
  }
  std::string driver = opts.linker;
  if (driver.empty())
    if (const char *cc = std::getenv("CC"))
      driver = cc;
  if (driver.empty())
    driver = "cc";
  auto path = llvm::sys::findProgramByName(driver);
  if (!path) {
    error =
        "cannot find the linker driver '" + driver + "'; install gcc or set CC";
    return failure();
  }
  std::string rpath = "-Wl,-rpath," + opts.runtimeLibDir;
  std::string libDir = "-L" + opts.runtimeLibDir;
  llvm::SmallVector<llvm::StringRef> args = {
      *path, object, "-o", output, libDir, "-lrlhf_runtime", rpath};
  // The driver's messages go to a file, then on to stderr: what they say
  // picks the advice.
  llvm::SmallString<128> messages;
  if (llvm::sys::fs::createTemporaryFile("rlhfc-link", "txt", messages)) {
    error = "cannot create a temporary file for the linker's messages";
    return failure();
  }
  llvm::FileRemover removeMessages(messages);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, std::nullopt,
                                                llvm::StringRef(messages)};
  int rc = llvm::sys::ExecuteAndWait(*path, args, std::nullopt, redirects, 0, 0,
                                     &error);
  std::string said;
  if (auto text = llvm::MemoryBuffer::getFile(messages))
    said = (*text)->getBuffer().str();
  llvm::errs() << said;
  if (rc == 0)
    return success();
  if (!error.empty())
    return failure();
  error = driver + " failed with status " + std::to_string(rc) +
          " while linking '" + output.str() + "'";
  if (llvm::StringRef(said).contains("undefined reference to `rlhf_"))
    error += "; the runtime in '" + opts.runtimeLibDir +
             "' was built from another version than this rlhfc: link with the "
             "runtime built beside it";
  else if (llvm::StringRef(said).contains("No space left on device"))
    error += "; the disk is full";
  return failure();
}
