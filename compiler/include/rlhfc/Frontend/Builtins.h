//===- Builtins.h - model methods and host functions ------------*- C++ -*-===//
//
// The signature tables Sema checks calls against. One table serves Sema,
// the AST dump, completion in the language server, and the docs.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_BUILTINS_H
#define RLHFC_FRONTEND_BUILTINS_H

#include "rlhfc/Frontend/Sema.h"

#include <functional>
#include <optional>

namespace rlhfc {

/// A named setting such as `clip = 0.2` or `command = "python3 check.py"`.
struct SettingSpec {
  const char *name;
  double fallback;
  double min, max;
  bool integer = false;
  bool required = false;
  const char *help = "";
  /// A string in double quotes instead of a number (min, max unused).
  bool text = false;
  /// Not given: no value at all, and the callee's documented behaviour.
  bool optional = false;
};

/// What a setting takes, for docs and the editor: " (required, a string in
/// double quotes)", " (optional)" or " = 0.2".
std::string settingDefault(const SettingSpec &s);

/// A tensor input of one kind.
struct InputSpec {
  std::string name;
  TensorKind kind = TensorKind::Tokens;
};

struct BuiltinSpec {
  const char *name;
  const char *summary;
  std::vector<InputSpec> inputs;
  std::vector<SettingSpec> settings;
  /// Result type from the batch N and sequence length S of the inputs.
  std::function<RecordType(int64_t N, int64_t S)> result;
  std::string signature; ///< "(score, values, logprobs, ref_logprobs)"
};

struct MethodSpec {
  const char *name;
  sema::Node::Kind kind;
  const char *summary;
  const char *inputHelp;
  std::vector<SettingSpec> settings;
};

/// A primitive of function bodies (`fn`): exp, where, seq_mean...
struct FnPrimitiveSpec {
  const char *name;
  const char *signature; ///< "(x: [N, S], mask: [N, S]) -> [N]"
  const char *summary;
};

/// A coefficient the run adapts, which only a number argument of a
/// function's call may be (lang/README.md §6.7): `adaptive_kl(init, target,
/// horizon = 10000)` and `adaptive_entropy(init, target, delta = 0.0001,
/// max = 0.005, min = 0)`.
struct ControlSpec {
  FnPrimitiveSpec spec;
  /// Its parameters in order; the first two are required.
  llvm::ArrayRef<SettingSpec> params;
  /// The call's number result it follows (`kl`), and what that measures
  /// (`KL`), for errors.
  const char *metric;
  const char *noun;
  /// For errors: what it is, a call that gives one, its parameters in
  /// words, and the stdlib functions that return its metric.
  const char *what;
  const char *example;
  const char *usage;
  const char *returners;
};
llvm::ArrayRef<ControlSpec> allControls();
const ControlSpec *lookupControl(llvm::StringRef name);

const BuiltinSpec *lookupBuiltin(llvm::StringRef name);
const FnPrimitiveSpec *lookupFnPrimitive(llvm::StringRef name);
llvm::ArrayRef<FnPrimitiveSpec> allFnPrimitives();
const MethodSpec *lookupMethod(llvm::StringRef name);
std::vector<std::string> builtinNames();
std::vector<std::string> methodNames();
llvm::ArrayRef<BuiltinSpec> allBuiltins();
llvm::ArrayRef<MethodSpec> allMethods();

} // namespace rlhfc

#endif // RLHFC_FRONTEND_BUILTINS_H
