//===- rlhfc.cpp - the rlhfc compiler driver ------------------------------===//

#include "mlir/IR/MLIRContext.h"
#include "rlhf/IR/RLHFDialect.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory rlhfcCat("rlhfc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .rlhf>"),
                                      cl::init("-"), cl::cat(rlhfcCat));

int main(int argc, char **argv) {
  InitLLVM x(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "rlhfc " << RLHFC_VERSION << " (MLIR/LLVM " << LLVM_VERSION_STRING
       << ")\n";
  });
  cl::HideUnrelatedOptions(rlhfcCat);
  cl::ParseCommandLineOptions(argc, argv, "rlhfc: the RLHF workflow compiler\n");
  mlir::MLIRContext ctx;
  ctx.getOrLoadDialect<mlir::rlhf::RLHFDialect>();
  outs() << "rlhfc: loaded dialects:";
  for (auto *d : ctx.getLoadedDialects())
    outs() << " " << d->getNamespace();
  outs() << "\n";
  return 0;
}
