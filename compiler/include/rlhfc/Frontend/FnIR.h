//===- FnIR.h - checked bodies of .rlhf functions ---------------*- C++ -*-===//
//
// What Sema makes of a call to a function written in the language: the
// body with every callee inlined and every number parameter bound to the
// call's value, as a list of typed ops in the order they run. MLIRGen turns
// it into the region of an rlhf.compute or rlhf.train_step.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_FRONTEND_FNIR_H
#define RLHFC_FRONTEND_FNIR_H

#include "mlir/IR/Location.h"

#include <string>
#include <vector>

namespace rlhfc::sema {

/// The rank of an fn value; token ids are their own.
enum class FnRank { Scalar = 0, Seq = 1, Token = 2, Tokens = 3 };

/// A coefficient the run adapts after each call from the call's own
/// metric (FnProgram.h's `adaptive_kl`, `adaptive_entropy`):
/// `adaptive_kl(init, target, horizon)` moves toward making the call's `kl`
/// output `target`; `adaptive_entropy(init, target, delta, max, min)`
/// steps by `delta` toward holding its `entropy` at `target`.
struct FnControl {
  enum class Kind { Kl, Entropy };
  Kind kind = Kind::Kl;
  double init = 0, target = 0;
  double horizon = 10000;                    ///< Kl
  double delta = 1e-4, max = 0.005, min = 0; ///< Entropy
  /// `adaptive_kl`, `adaptive_entropy`.
  const char *name() const {
    return kind == Kind::Kl ? "adaptive_kl" : "adaptive_entropy";
  }
  /// The result of the call it follows: `kl`, `entropy`.
  const char *metric() const { return kind == Kind::Kl ? "kl" : "entropy"; }
};

/// One op of a body. `op` is the runtime's opcode (runtime FnProgram.h):
/// input, const, adaptive_kl, adaptive_entropy, running_mean, running_std, neg
/// exp log log1p expm1 sqrt abs sigmoid softplus stop_gradient, add sub mul div
/// min max lt le gt ge eq ne, where, clamp, broadcast,
/// seq_|group_|batch_|token_ sum|mean|var|std|max|min, last, next, rcumsum,
/// mask_of, and in losses logprobs values score entropy.
struct FnOp {
  std::string op;
  std::vector<int> args; ///< indices of earlier ops
  FnRank rank = FnRank::Scalar;
  double number = 0;      ///< const: the value; input: the input's index
  int64_t group = 0;      ///< group_*: rows per group
  int64_t correction = 1; ///< *_var, *_std
  FnControl control;      ///< adaptive_kl, adaptive_entropy
  mlir::LocationAttr loc;
};

struct FnBody {
  std::string name; ///< the function called
  bool loss = false;
  std::vector<FnOp> ops;
  /// Host functions: the result fields and the ops that compute them; a
  /// loss: {"loss", op}.
  std::vector<std::pair<std::string, int>> outputs;
};

} // namespace rlhfc::sema

#endif // RLHFC_FRONTEND_FNIR_H
