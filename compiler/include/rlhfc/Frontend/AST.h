//===- AST.h - the .rlhf abstract syntax tree -------------------*- C++ -*-===//
//
// A plain tree built from the ANTLR parse tree. Every node carries an MLIR
// FileLineColLoc so that Sema, MLIRGen and later passes all report errors at
// .rlhf source positions through the same diagnostic engine.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_AST_H
#define RLHFC_FRONTEND_AST_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace rlhfc::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `name = value` or a positional `value` in a call or annotation.
struct Arg {
  std::string name; // empty when positional
  mlir::Location loc;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Number,
    String,
    Bool,
    Name,
    Field,
    Call,
    Slice,
    Neg,
    Binary,
    List
  };
  // Binary operators: + - * / and the comparisons < <= > >= == !=.
  Kind kind;
  mlir::Location loc;

  double number = 0; // Number
  bool isInteger = false;
  std::string text;      // Number: unit; String: value; Name/Field: identifier;
                         // Binary: operator
  bool boolean = false;  // Bool
  ExprPtr base;          // Field/Call/Slice base, Neg operand, Binary lhs
  ExprPtr lo, hi;        // Slice bounds; Binary rhs in `hi`
  std::vector<Arg> args; // Call
  std::vector<ExprPtr> elems; // List

  Expr(Kind k, mlir::Location l) : kind(k), loc(l) {}
};

/// `name;` (a flag) or `name = value;` inside a declaration block.
struct Property {
  std::string name;
  mlir::Location loc;
  ExprPtr value; // null for a flag
};

enum class EntityKind { Hardware, Arch, Cluster, Model, Dataset };
llvm::StringRef entityKindName(EntityKind k);

/// `hardware|arch|cluster|model|dataset NAME (: BASE("path")?)? { properties
/// }`.
struct EntityDecl {
  EntityKind kind;
  std::string name;
  mlir::Location loc;
  std::string base; // empty when absent
  mlir::Location baseLoc;
  std::vector<Property> props;
  /// `: hf("dir")`: the base's path argument, and where it is written.
  std::optional<std::string> basePath;
  mlir::Location basePathLoc = baseLoc;
};

struct ImportDecl {
  std::string path;
  mlir::Location loc;
  std::string resolved; // absolute path once loaded
};

struct Param {
  std::string name, type;
  mlir::Location loc, typeLoc;
};

/// `@name(args)` before a statement, e.g. `@place(mesh = c[0:8], tp = 4)`.
struct Annotation {
  std::string name;
  mlir::Location loc;
  std::vector<Arg> args;
};

/// `(target =)? expr;` in an algorithm body.
struct Stmt {
  std::vector<Annotation> annotations;
  std::string target; // empty when the result is not bound
  mlir::Location loc;
  ExprPtr expr;
};

struct AlgorithmDecl {
  std::string name;
  mlir::Location loc;
  std::vector<Param> params;
  std::vector<Stmt> body;
};

/// `kind[dims]` in a function signature: `score[N]`, `logprobs[N, S]`,
/// `number`.
struct FnType {
  std::string kind;
  std::vector<std::string> dims;
  mlir::Location loc;
};

/// `name: type (= default)?` of a function.
struct FnParam {
  std::string name;
  mlir::Location loc;
  FnType type;
  ExprPtr fallback; // null when the parameter has no default
};

/// `let name = expr;` or `return expr, ...;` in a function body.
struct FnStmt {
  enum class Kind { Let, Return };
  Kind kind;
  std::string name; // Let
  mlir::Location loc;
  std::vector<ExprPtr> values; // one for Let
};

/// `fn name(params) -> results { statements }`.
struct FnDecl {
  std::string name;
  mlir::Location loc;
  std::vector<FnParam> params;
  /// Named results `-> (a: k[N], ...)`; a single `-> k[N]` is named after
  /// its kind.
  std::vector<std::pair<std::string, FnType>> results;
  bool namedResults = false;
  std::vector<FnStmt> body;
};

/// `run ALGO(args) { properties }`: the entry point of a program.
struct RunDecl {
  std::string algorithm;
  mlir::Location loc;
  std::vector<Arg> args;
  std::vector<Property> props;
};

/// One parsed source file.
struct Module {
  std::string filename;
  /// Loaded implicitly from the standard library (stdlib/prelude.rlhf): its
  /// functions yield to any declaration of the same name in the program.
  bool prelude = false;
  std::vector<ImportDecl> imports;
  std::vector<std::unique_ptr<EntityDecl>> entities;
  std::vector<std::unique_ptr<AlgorithmDecl>> algorithms;
  std::vector<std::unique_ptr<FnDecl>> functions;
  std::vector<std::unique_ptr<RunDecl>> runs;
};

} // namespace rlhfc::ast

#endif // RLHFC_FRONTEND_AST_H
