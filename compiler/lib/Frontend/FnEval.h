//===- FnEval.h - evaluating a function body (private) ----------*- C++ -*-===//
//
// One check or instantiation of a function: walks its body with every
// callee inlined, types each value (rank, shape, kind) and records how it
// depends on the trained model, and emits the FnOps of the result.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_FNEVAL_H
#define RLHFC_FRONTEND_FNEVAL_H

#include "FnCheck.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <deque>
#include <set>

namespace rlhfc::sema {

/// A typed value of a function body.
struct FnVal {
  int id = -1; ///< the FnOp computing it
  FnRank rank = FnRank::Scalar;
  std::vector<std::string> dims;  ///< dimension names, one per tensor rank
  std::optional<TensorKind> kind; ///< none: plain numbers
  bool number = false;            ///< known before the run (maybe symbolic)
  std::optional<double> constant; ///< its value, when known
  bool model = false;        ///< depends on the model's outputs with a gradient
  bool cut = false;          ///< depends on them only through ops without one
  mlir::LocationAttr cutLoc; ///< where the gradient stopped
  bool reduced = false;      ///< (loss) a sum of batch reductions
  bool poisoned = false;     ///< its definition failed; stay quiet
  bool input = false;        ///< a call's input as passed (mask_of reads it)
  bool positive = false;     ///< every value above 0 (an exp)
};

class FnEval {
public:
  /// Checks `top` for itself (`generic`: numbers symbolic) or instantiates
  /// it for a call at `callSite`.
  FnEval(FnChecker &c, const ast::FnDecl &top, bool generic,
         mlir::LocationAttr callSite);

  /// Runs `top` on `params` (one per parameter); its results, or none after
  /// an error.
  std::optional<std::vector<FnVal>> run(std::vector<FnVal> params);

  /// An input or number parameter value of the top function.
  FnVal input(int64_t index, const ast::FnType &t,
              std::vector<std::string> dims);
  FnVal number(std::optional<double> value);
  /// A number the run adapts (`adaptive_kl`, `adaptive_entropy`), unknown
  /// before it.
  FnVal adaptive(const FnControl &c, mlir::LocationAttr loc);

  std::vector<FnOp> ops;
  std::map<std::string, int64_t> sizes; ///< instantiation: dimension sizes
  bool failed = false;

private:
  struct Frame {
    const ast::FnDecl *decl;
    llvm::StringMap<FnVal> env;
    mlir::LocationAttr callLoc;
    std::map<std::string, std::string> dims; ///< own name -> caller's
    llvm::StringSet<> used;                  ///< names the body has read
  };

  mlir::InFlightDiagnostic fail(mlir::Location loc, const llvm::Twine &msg);
  int emit(llvm::StringRef op, std::vector<int> args, FnRank rank,
           mlir::Location loc, double number = 0);

  std::optional<std::vector<FnVal>>
  body(const ast::FnDecl &d, std::vector<FnVal> args,
       std::map<std::string, std::string> dims, mlir::LocationAttr callLoc);
  std::optional<FnVal> result(const ast::FnDecl &d, size_t i, FnVal v,
                              const ast::Expr &e, const Frame &f);
  void checkLoss(const FnVal &v, const ast::Expr &e);

  std::optional<FnVal> expr(const ast::Expr &e);
  std::optional<FnVal> binary(const ast::Expr &e);
  std::optional<FnVal> call(const ast::Expr &e);
  std::optional<FnVal> modelOutput(const ast::Expr &e);
  std::optional<FnVal> userCall(const ast::Expr &e, const ast::FnDecl &first);
  std::optional<FnVal> primitive(const ast::Expr &e, llvm::StringRef name);
  std::optional<FnVal> reduction(const ast::Expr &e, llvm::StringRef over,
                                 llvm::StringRef stat, std::vector<FnVal> &args,
                                 int64_t correction);

  std::optional<FnVal> bindParam(const ast::FnDecl &callee,
                                 const ast::FnParam &p, FnVal v,
                                 mlir::Location at,
                                 std::map<std::string, std::string> &dims);
  /// Checks that `vs` may meet elementwise; the rank and dims of the result.
  bool sameShape(llvm::ArrayRef<const FnVal *> vs, llvm::StringRef what,
                 mlir::Location loc, FnVal &out);
  bool noTokens(const FnVal &v, llvm::StringRef what, mlir::Location loc);
  /// In a loss, batch reductions may only be summed and scaled.
  bool notReduced(const FnVal &v, llvm::StringRef what, mlir::Location loc);
  std::optional<int64_t> integer(const FnVal &v, llvm::StringRef what,
                                 int64_t min, int64_t fallback,
                                 mlir::Location loc);

  FnChecker &c;
  const ast::FnDecl &top;
  bool generic, loss;
  mlir::LocationAttr callSite;
  std::deque<Frame> stack;
  mlir::LocationAttr lmLoc, valueLoc; ///< first model output of each head
  /// Checking only: a callee's result per callee and argument properties,
  /// so a function calling another twice is not checked twice (the ops are
  /// dropped anyway). None: that call failed.
  std::map<std::string, std::optional<FnVal>> checked;
  /// Messages reported at the algorithm's call, each once.
  std::set<std::string> reportedAtCall;
};

/// "[N, S]", "a scalar" or "token ids [N, S]".
std::string shapeText(const FnVal &v);

} // namespace rlhfc::sema

#endif // RLHFC_FRONTEND_FNEVAL_H
