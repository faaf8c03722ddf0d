//===- FnCheck.h - checking .rlhf functions (private) -----------*- C++ -*-===//
//
// Sema's part for `fn` declarations. Every declaration is checked once for
// itself, with its number parameters symbolic, so an error shows even in a
// function nobody calls. A call from an algorithm then instantiates it:
// binds the parameters to the call's tensors and numbers, inlines every
// callee and yields the FnBody MLIRGen lowers.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_FNCHECK_H
#define RLHFC_FRONTEND_FNCHECK_H

#include "rlhfc/Frontend/AST.h"
#include "rlhfc/Frontend/FnIR.h"
#include "rlhfc/Frontend/Types.h"

#include "mlir/IR/Diagnostics.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

namespace rlhfc::sema {

/// What a call from an algorithm passes for one parameter.
struct FnArg {
  std::optional<TensorType> tensor; ///< tensor parameters
  double number = 0;                ///< number parameters
  bool integer = false;
  /// A number parameter given `adaptive_kl(...)` or
  /// `adaptive_entropy(...)`: the run sets its value.
  std::optional<FnControl> control;
  mlir::LocationAttr loc; ///< the argument, for errors
};

class FnChecker {
public:
  using Diag = std::function<mlir::InFlightDiagnostic(mlir::Location,
                                                      const llvm::Twine &)>;
  FnChecker(Diag error, Diag warning)
      : error(std::move(error)), warning(std::move(warning)) {}

  /// Declarations of one name are overloads, told apart by the shapes of
  /// their tensor parameters.
  /// A `library` one (the prelude's) reports errors that depend on how it
  /// is called at the algorithm's call, since its caller cannot edit it.
  void add(const ast::FnDecl &d, bool library = false) {
    decls[d.name].push_back(&d);
    if (library)
      libraryDecls.insert(&d);
  }
  /// The first declaration of `name` (the overloads share its parameters).
  const ast::FnDecl *find(llvm::StringRef name) const;
  /// The overload of `name` whose tensor parameters have `ranks` (the
  /// number of dimensions bound to parameter i; none for numbers and
  /// parameters not given), or null.
  const ast::FnDecl *pick(llvm::StringRef name,
                          llvm::ArrayRef<std::optional<size_t>> ranks) const;
  /// Whether `name` has more than one declaration.
  bool overloaded(llvm::StringRef name) const;
  /// "'f(x: score[N]) -> ...' or 'f(x: advantages[N, S]) -> ...'".
  std::string candidates(llvm::StringRef name) const;
  std::vector<std::string> names() const;

  /// Checks every declaration (each once); false when one has an error.
  bool checkAll();
  /// Whether `d` checked without errors (checking it if needed).
  bool valid(const ast::FnDecl &d);

  /// The body of `d` called with `args` (one per parameter, in order) from
  /// `call`, and the record it returns; errors that depend on the values
  /// (a group size that does not divide the batch) are reported here.
  std::optional<FnBody> instantiate(const ast::FnDecl &d,
                                    llvm::ArrayRef<FnArg> args,
                                    mlir::Location call, RecordType &result);

  /// `-> loss`: trains a model instead of computing a record.
  static bool isLoss(const ast::FnDecl &d);
  /// The tensor kind a parameter or result type names (null: `number`,
  /// `int` or unknown).
  static std::optional<TensorKind> kindOf(const ast::FnType &t);
  static bool isNumber(const ast::FnType &t) {
    return t.kind == "number" || t.kind == "int";
  }
  /// "(x: score[N], clip: number = 0.2) -> advantages[N]".
  static std::string signature(const ast::FnDecl &d);

  enum class State { Unchecked, InProgress, Valid, Invalid };

private:
  friend class FnEval;

  Diag error, warning;
  std::map<std::string, std::vector<const ast::FnDecl *>> decls;
  /// Overloads must share their parameters but for shapes; false after an
  /// error.
  bool checkOverloads(const std::vector<const ast::FnDecl *> &set);
  std::map<const ast::FnDecl *, State> states;
  std::set<const ast::FnDecl *> libraryDecls;
};

} // namespace rlhfc::sema

#endif // RLHFC_FRONTEND_FNCHECK_H
