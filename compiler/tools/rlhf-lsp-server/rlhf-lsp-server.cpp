//===- rlhf-lsp-server.cpp - the .rlhf language server --------------------===//
//
// Speaks LSP over stdin/stdout for editors (the VS Code extension starts it
// from its `rlhf.server.path` setting). Diagnostics, hovers and plans come
// from the same frontend and planning passes as rlhfc. Torch-free.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/LSP/LSPServer.h"
#include "rlhfc/LSP/MessageFilter.h"
#include "rlhfc/LSP/Server.h"

#include "mlir/Tools/lsp-server-support/Logging.h"
#include "mlir/Tools/lsp-server-support/Transport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Program.h"

#include <cerrno>
#include <cstring>
#include <thread>
#include <unistd.h>

using namespace llvm;
namespace mlsp = mlir::lsp;

namespace {

cl::OptionCategory serverCat("rlhf-lsp-server options");

cl::opt<mlsp::JSONStreamStyle> inputStyle(
    "input-style", cl::desc("Input JSON stream encoding"),
    cl::values(clEnumValN(mlsp::JSONStreamStyle::Standard, "standard",
                          "usual LSP protocol"),
               clEnumValN(mlsp::JSONStreamStyle::Delimited, "delimited",
                          "messages delimited by `// -----` lines, with // "
                          "comment support")),
    cl::init(mlsp::JSONStreamStyle::Standard), cl::Hidden, cl::cat(serverCat));
cl::opt<bool>
    litTest("lit-test",
            cl::desc("Abbreviation for -input-style=delimited -pretty "
                     "-log=verbose, for lit tests"),
            cl::init(false), cl::cat(serverCat));
cl::opt<mlsp::Logger::Level> logLevel(
    "log", cl::desc("Verbosity of log messages written to stderr"),
    cl::values(clEnumValN(mlsp::Logger::Level::Error, "error", "errors only"),
               clEnumValN(mlsp::Logger::Level::Info, "info",
                          "high level execution tracing"),
               clEnumValN(mlsp::Logger::Level::Debug, "verbose",
                          "low level details")),
    cl::init(mlsp::Logger::Level::Info), cl::cat(serverCat));
cl::opt<bool> prettyPrint("pretty", cl::desc("Pretty-print JSON output"),
                          cl::init(false), cl::cat(serverCat));

// The same import and planning options as rlhfc, so that the editor shows
// what `rlhfc` run with them reports.
cl::list<std::string>
    includeDirs("I", cl::desc("Add a folder to the import search path"),
                cl::value_desc("dir"), cl::Prefix, cl::cat(serverCat));
cl::opt<std::string> stdlibDir("stdlib",
                               cl::desc("Standard library folder (default: the "
                                        "installed one, or $RLHF_STDLIB)"),
                               cl::value_desc("dir"), cl::init(""),
                               cl::cat(serverCat));
rlhfc::PlanningCLOptions planningFlags(serverCat, /*offerProgress=*/false);

} // namespace

int main(int argc, char **argv) {
  InitLLVM x(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "rlhf-lsp-server " << RLHFC_VERSION << " (MLIR/LLVM "
       << LLVM_VERSION_STRING << ")\n";
  });
  cl::HideUnrelatedOptions(serverCat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "rlhf-lsp-server: the language server for .rlhf programs\n\n"
      "Speaks the Language Server Protocol on stdin and stdout. Editors start\n"
      "it; see docs/lsp.md.\n");

  if (litTest) {
    inputStyle = mlsp::JSONStreamStyle::Delimited;
    logLevel = mlsp::Logger::Level::Debug;
    prettyPrint = true;
  }
  mlsp::Logger::setLogLevel(logLevel);

  rlhfc::lsp::ServerOptions options;
  options.frontend.includeDirs.assign(includeDirs.begin(), includeDirs.end());
  options.frontend.stdlibDir = rlhfc::defaultStdlibDir(stdlibDir);
  options.planning = planningFlags.get();
  if (llvm::Error e = rlhfc::checkPlanningOptions(options.planning)) {
    llvm::errs() << "rlhf-lsp-server: error: " << llvm::toString(std::move(e))
                 << "\n";
    return 1;
  }
  rlhfc::lsp::Server server(options);

  llvm::sys::ChangeStdinToBinary();
  std::FILE *input = stdin;
  std::thread filter;
  if (inputStyle == mlsp::JSONStreamStyle::Standard) {
    // Malformed JSON-RPC would end MLIR's transport: filter it out first.
    int fds[2];
    if (pipe(fds) != 0) {
      llvm::errs() << "rlhf-lsp-server: error: pipe: " << std::strerror(errno)
                   << "\n";
      return 1;
    }
    input = fdopen(fds[0], "rb");
    filter = std::thread(rlhfc::lsp::filterMessages, stdin, fds[1]);
    filter.detach(); // it ends at stdin's EOF; exit need not wait for it
  }
  mlsp::JSONTransport transport(input, llvm::outs(), inputStyle, prettyPrint);
  return mlir::failed(rlhfc::lsp::runLSPServer(server, transport)) ? 1 : 0;
}
