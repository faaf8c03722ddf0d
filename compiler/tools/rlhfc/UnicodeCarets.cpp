//===- UnicodeCarets.cpp - carets under lines with non-ASCII text ---------===//

#include "UnicodeCarets.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/Unicode.h"
#include "llvm/Support/WithColor.h"

using namespace rlhfc;

namespace {

/// The file:line:col a diagnostic points at, through names, call sites
/// (the callee) and fusions, as mlir::SourceMgrDiagnosticHandler looks.
std::optional<mlir::FileLineColLoc> fileLineCol(mlir::Location loc) {
  std::optional<mlir::FileLineColLoc> found;
  loc->walk([&](mlir::Location l) {
    if (auto f = mlir::dyn_cast<mlir::FileLineColLoc>(l)) {
      found = f;
      return mlir::WalkResult::interrupt();
    }
    if (auto c = mlir::dyn_cast<mlir::CallSiteLoc>(l)) {
      found = fileLineCol(c.getCallee());
      return found ? mlir::WalkResult::interrupt()
                   : mlir::WalkResult::skip();
    }
    return mlir::WalkResult::advance();
  });
  return found;
}

/// The text of `line` (1-based) of the buffer named `file`, if `sm` has it.
std::optional<llvm::StringRef> lineOf(llvm::SourceMgr &sm,
                                      llvm::StringRef file, unsigned line) {
  for (unsigned b = 1; b <= sm.getNumBuffers(); ++b) {
    const llvm::MemoryBuffer *buf = sm.getMemoryBuffer(b);
    if (buf->getBufferIdentifier() != file)
      continue;
    llvm::StringRef text = buf->getBuffer();
    for (unsigned i = 1; i < line; ++i) {
      size_t nl = text.find('\n');
      if (nl == llvm::StringRef::npos)
        return std::nullopt;
      text = text.drop_front(nl + 1);
    }
    return text.take_until([](char c) { return c == '\n' || c == '\r'; });
  }
  return std::nullopt;
}

bool isASCII(llvm::StringRef s) {
  return llvm::all_of(s, [](char c) { return (unsigned char)c < 0x80; });
}

/// The blanks that put a caret under code point `col` (1-based) of `line`,
/// as wide as what a terminal shows before it: a tab stays a tab, a wide
/// CJK character takes two columns.
std::string caretIndent(llvm::StringRef line, unsigned col) {
  std::string out;
  const char *p = line.begin(), *end = line.end();
  for (unsigned c = 1; c < col && p < end; ++c) {
    unsigned len = llvm::getNumBytesForUTF8(*p);
    len = std::max(1u, std::min<unsigned>(len, unsigned(end - p)));
    llvm::StringRef ch(p, len);
    if (ch == "\t") {
      out += '\t';
    } else {
      int w = llvm::sys::unicode::columnWidthUTF8(ch);
      out.append(size_t(w < 0 ? 1 : w), ' ');
    }
    p += len;
  }
  return out;
}

} // namespace

UnicodeCaretHandler::UnicodeCaretHandler(llvm::SourceMgr &sm,
                                         mlir::MLIRContext *ctx,
                                         llvm::raw_ostream &os)
    : sm(sm), ctx(ctx), os(os) {
  id = ctx->getDiagEngine().registerHandler(
      [this](mlir::Diagnostic &d) { return handle(d); });
}

UnicodeCaretHandler::~UnicodeCaretHandler() {
  ctx->getDiagEngine().eraseHandler(id);
}

mlir::LogicalResult UnicodeCaretHandler::handle(mlir::Diagnostic &diag) {
  std::optional<mlir::FileLineColLoc> at = fileLineCol(diag.getLocation());
  if (!at)
    return mlir::failure();
  std::optional<llvm::StringRef> line =
      lineOf(sm, at->getFilename().getValue(), at->getLine());
  // SourceMgr's caret is right under an ASCII line; a blank one (an empty
  // file) gets no line and caret at all.
  if (!line || (isASCII(*line) && !line->trim().empty()))
    return mlir::failure();
  const char *severity = "error";
  switch (diag.getSeverity()) {
  case mlir::DiagnosticSeverity::Warning:
    severity = "warning";
    break;
  case mlir::DiagnosticSeverity::Note:
    severity = "note";
    break;
  case mlir::DiagnosticSeverity::Remark:
    severity = "remark";
    break;
  case mlir::DiagnosticSeverity::Error:
    break;
  }
  print(diag.getLocation(), severity, diag.str());
  for (mlir::Diagnostic &note : diag.getNotes())
    print(note.getLocation(), "note", note.str());
  return mlir::success();
}

void UnicodeCaretHandler::print(mlir::Location loc, llvm::StringRef severity,
                                llvm::StringRef message) {
  std::optional<mlir::FileLineColLoc> at = fileLineCol(loc);
  if (!at) {
    os << severity << ": " << message << "\n";
    return;
  }
  {
    llvm::WithColor bold(os, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true);
    os << at->getFilename().getValue() << ":" << at->getLine() << ":"
       << at->getColumn() << ": ";
  }
  llvm::HighlightColor color = severity == "error"
                                   ? llvm::HighlightColor::Error
                               : severity == "warning"
                                   ? llvm::HighlightColor::Warning
                                   : llvm::HighlightColor::Note;
  llvm::WithColor(os, color) << severity << ": ";
  llvm::WithColor(os, llvm::raw_ostream::SAVEDCOLOR, /*Bold=*/true)
      << message << "\n";
  std::optional<llvm::StringRef> line =
      lineOf(sm, at->getFilename().getValue(), at->getLine());
  if (!line || line->trim().empty())
    return;
  os << *line << "\n" << caretIndent(*line, at->getColumn());
  llvm::WithColor(os, llvm::raw_ostream::GREEN, /*Bold=*/true) << "^";
  os << "\n";
}
