//===- RLHFFnOps.td - ops in the bodies of .rlhf functions -*- tablegen -*-===//
//
// A function written in the language (an advantage estimator, a reward, a
// loss) lowers into the region of the `rlhf.compute` or `rlhf.train_step`
// that calls it. Elementwise arithmetic, comparisons and selects are
// upstream `arith` and `math` ops on tensors; the ops here are what those
// dialects lack: masked reductions over sequences, groups, the batch or its
// tokens, the scans of advantage estimators, and the trained model's fresh
// outputs in a loss.
//
// Types: scalars are f64; per-sequence values tensor<?xf32>; per-token
// values tensor<?x?xf32>; token ids tensor<?x?xi32>. Comparisons give i1
// tensors that `arith.uitofp` turns into 0/1 masks.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_FNOPS_TD
#define RLHF_FNOPS_TD

include "rlhf/IR/RLHFEnums.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def RLHF_FnSeq : 1DTensorOf<[F32]>;
def RLHF_FnTok : 2DTensorOf<[F32]>;
def RLHF_FnFloat : AnyTypeOf<[F64, RLHF_FnSeq, RLHF_FnTok]>;
def RLHF_FnTokens : 2DTensorOf<[I32]>;

class RLHF_FnOp<string mnemonic, list<Trait> traits = []> :
    RLHF_Op<mnemonic, !listconcat(traits, [Pure])>;

def RLHF_YieldOp : RLHF_Op<"yield", [
    Pure, Terminator, ParentOneOf<["ComputeOp", "TrainStepOp"]>]> {
  let summary = "the results of a function body";
  let description = [{
    Ends the region of an `rlhf.compute` or `rlhf.train_step` that calls a
    function: one value per field of the compute's result record, or the
    scalar loss of a train step.
  }];
  let arguments = (ins Variadic<RLHF_FnFloat>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def RLHF_SplatOp : RLHF_FnOp<"splat", [AllTypesMatch<["like", "result"]>]> {
  let summary = "a scalar repeated in the shape of a tensor";
  let description = [{
    Lets a scalar meet a tensor in `arith` ops, whose operands share one
    type: `0.2 * adv` is `arith.mulf (rlhf.splat 0.2 like adv), adv`.

    ```mlir
    %c = rlhf.splat %clip like %adv : tensor<?x?xf32>
    ```
  }];
  let arguments = (ins F64:$scalar, RLHF_FnFloat:$like);
  let results = (outs RLHF_FnFloat:$result);
  let assemblyFormat = "$scalar `like` $like attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def RLHF_AdaptiveKlOp : RLHF_FnOp<"adaptive_kl"> {
  let summary = "a KL coefficient the run adapts toward a target KL";
  let description = [{
    The value of a number parameter given `adaptive_kl(init, target,
    horizon)` at the call (Ziegler et al. 2019; TRL's and verl's adaptive
    KL controller). The first call reads `init`. After each call of a
    training step the runtime moves it by the call's `kl` result (a loss's
    `kl` metric), `coef *= 1 + clip(kl / target - 1, -0.2, 0.2) * N /
    horizon` with N the batch's rows, logs it as `kl_coef` (`kl_coef/MODEL`
    for a loss) and saves it in checkpoints. An evaluation reads it without
    moving it.

    A body holds at most one; its op's call yields a scalar named `kl`.

    ```mlir
    %beta = rlhf.adaptive_kl init 5.000000e-02 target 1.000000e-01 horizon 1.000000e+04
    ```
  }];
  let arguments = (ins F64Attr:$init, F64Attr:$target, F64Attr:$horizon);
  let results = (outs F64:$result);
  let assemblyFormat =
      "`init` $init `target` $target `horizon` $horizon attr-dict";
  let hasVerifier = 1;
}

def RLHF_AdaptiveEntropyOp : RLHF_FnOp<"adaptive_entropy"> {
  let summary = "an entropy coefficient the run adapts toward a target "
                "entropy";
  let description = [{
    The value of a number parameter given `adaptive_entropy(init, target,
    delta, max, min)` at the call: Skywork-OR1's adaptive entropy control
    (He et al. 2025), which keeps the policy's entropy from collapsing
    without the instability of a large fixed bonus. The first call reads
    `init`. After each call of a training step the runtime reads the call's
    `entropy` metric: under `target`, the coefficient rises by `delta`,
    otherwise it falls by `delta`, within [`min`, `max`]; and the call uses
    it only while the last entropy was under the target (0 otherwise). It
    is logged as `entropy_coef` (`entropy_coef/MODEL` for a loss), the value
    used, and saved in checkpoints. An evaluation reads it without moving
    it.

    A body holds at most one; its op's call yields a scalar named
    `entropy`.

    ```mlir
    %c = rlhf.adaptive_entropy init 0.000000e+00 target 2.000000e-01 delta 1.000000e-04 max 5.000000e-03 min 0.000000e+00
    ```
  }];
  let arguments = (ins F64Attr:$init, F64Attr:$target, F64Attr:$delta,
                       F64Attr:$max, F64Attr:$min);
  let results = (outs F64:$result);
  let assemblyFormat =
      "`init` $init `target` $target `delta` $delta `max` $max `min` $min "
      "attr-dict";
  let hasVerifier = 1;
}

class RLHF_FnUnaryOp<string mnemonic, string sum> :
    RLHF_FnOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = sum;
  let arguments = (ins RLHF_FnFloat:$input);
  let results = (outs RLHF_FnFloat:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def RLHF_SigmoidOp : RLHF_FnUnaryOp<"sigmoid", "the logistic function, 1 / (1 + exp(-x))">;
def RLHF_SoftplusOp : RLHF_FnUnaryOp<"softplus",
    "log(1 + exp(x)), computed without overflow">;
def RLHF_StopGradientOp : RLHF_FnUnaryOp<"stop_gradient",
    "x, through which no gradient flows"> {
  let description = [{
    Its value is its input's; in a loss, backpropagation does not reach the
    model through it. CISPO weights each token's log-probability by its
    clipped importance ratio this way, so that the clip bounds the weight
    without dropping the token's gradient.
  }];
}

def RLHF_ClampOp : RLHF_FnOp<"clamp", [SameOperandsAndResultType]> {
  let summary = "limits a value to [lo, hi]";
  let description = [{
    Passes the gradient where `lo <= x <= hi`, as PPO's ratio clipping needs
    (a `minimumf`/`maximumf` pair would split it at the bounds).
  }];
  let arguments = (ins RLHF_FnFloat:$input, RLHF_FnFloat:$lo, RLHF_FnFloat:$hi);
  let results = (outs RLHF_FnFloat:$result);
  let assemblyFormat = "$input `,` $lo `,` $hi attr-dict `:` type($result)";
}

def RLHF_BroadcastOp : RLHF_FnOp<"broadcast", [AllTypesMatch<["like", "result"]>]> {
  let summary = "repeats a per-sequence value along the sequence";
  let description = [{
    `[N] -> [N, S]` shaped like `like`: the explicit step from a score to a
    per-token value.

    ```mlir
    %b = rlhf.broadcast %score like %logp : tensor<?xf32> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins RLHF_FnSeq:$input, RLHF_FnTok:$like);
  let results = (outs RLHF_FnTok:$result);
  let assemblyFormat = "$input `like` $like attr-dict `:` type($input) `->` type($result)";
}

def RLHF_ReduceOp : RLHF_FnOp<"reduce"> {
  let summary = "a masked sum, mean, variance, standard deviation, max or min";
  let description = [{
    `over` says what is reduced:
    - `seq`: each row of a per-token value under `mask`, `[N, S] -> [N]`;
    - `group`: groups of `group` consecutive rows (the samples of one
      prompt), each row replaced by its group's statistic, `[N] -> [N]`;
    - `batch`: all rows, `[N] -> scalar`;
    - `token`: every masked token of the batch, `[N, S] -> scalar`.

    Means divide by the mask total (at least 1); variances by the count less
    `correction` (at least 1), as `torch.var` does. `max` and `min` take the
    largest or smallest masked value (0 where a row has none), and pass
    the gradient to it (shared among ties, as `torch.amax`). Over the batch
    or its tokens they belong in a host function (`rlhf.compute`): a loss
    runs once per micro-batch, whose extreme is not the batch's.

    ```mlir
    %m = rlhf.reduce seq mean %x, %mask : tensor<?x?xf32>, tensor<?x?xf32> -> tensor<?xf32>
    %s = rlhf.reduce group std %r {group = 4 : i64} : tensor<?xf32> -> tensor<?xf32>
    ```
  }];
  let arguments = (ins RLHF_ReduceOverAttr:$over, RLHF_ReduceStatAttr:$stat,
                       RLHF_FnFloat:$input, Optional<RLHF_FnTok>:$mask,
                       DefaultValuedAttr<I64Attr, "0">:$group,
                       DefaultValuedAttr<I64Attr, "1">:$correction);
  let results = (outs RLHF_FnFloat:$result);
  let assemblyFormat = [{
    custom<EnumKeyword>($over) custom<EnumKeyword>($stat) $input (`,` $mask^)? attr-dict `:` type($input) (`,` type($mask)^)?
    `->` type($result)
  }];
  let hasVerifier = 1;
}

// Not pure: each call adds its rows to statistics the run keeps.
def RLHF_RunningMomentOp : RLHF_Op<"running_moment"> {
  let summary = "a value's mean or standard deviation over the run's calls";
  let description = [{
    The mean, or the standard deviation (over count - 1; 0 before two
    rows), of every row of a per-sequence value that this call site has
    seen over the run, this call's rows included: TRL's `RunningMoments`,
    which its score scaling and normalisation divide by. The runtime keeps
    the count, mean and sum of squared deviations per call site and value,
    adds each call's rows once however many ops read them, and saves them in
    checkpoints. An evaluation reads them without adding to them. Only in
    host functions (`rlhf.compute`): a loss runs once per micro-batch.

    ```mlir
    %s = rlhf.running_moment std %score : tensor<?xf32> -> f64
    ```
  }];
  let arguments = (ins RLHF_ReduceStatAttr:$stat, RLHF_FnSeq:$input);
  let results = (outs F64:$result);
  let assemblyFormat =
      "custom<EnumKeyword>($stat) $input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def RLHF_LastOp : RLHF_FnOp<"last", [SameOperandsAndResultType]> {
  let summary = "1 at each row's last masked position, 0 elsewhere";
  let description = [{
    Where a sequence-level reward lands in a per-token scan:
    `broadcast(score) * last(mask)`.
  }];
  let arguments = (ins RLHF_FnTok:$mask);
  let results = (outs RLHF_FnTok:$result);
  let assemblyFormat = "$mask attr-dict `:` type($result)";
}

def RLHF_NextOp : RLHF_FnOp<"next", [SameOperandsAndResultType]> {
  let summary = "the value at the next (masked) position, 0 after the last";
  let description = [{
    `out[:, t] = x[:, t + 1]`: the bootstrap value of a temporal difference,
    `r + gamma * next(v) - v`. With a mask, `x[:, t']` for `t'` the next
    masked position of the row, so a mask with holes (tool output inside a
    response) bootstraps from the next token the model generated, as the
    scan of `discounted_cumsum` steps over the holes.
  }];
  let arguments = (ins RLHF_FnTok:$input, Optional<RLHF_FnTok>:$mask);
  let results = (outs RLHF_FnTok:$result);
  let assemblyFormat =
      "$input (`,` $mask^)? attr-dict `:` type($result)";
}

def RLHF_DiscountedCumsumOp : RLHF_FnOp<"discounted_cumsum", [
    AllTypesMatch<["input", "mask", "result"]>]> {
  let summary = "a discounted reverse cumulative sum over masked tokens";
  let description = [{
    `out[t] = x[t] + discount * out[t']`, with `t'` the next masked position
    of the row (0 after the last): GAE's backward scan over the generated
    tokens of each sequence.
  }];
  let arguments = (ins RLHF_FnTok:$input, F64:$discount, RLHF_FnTok:$mask);
  let results = (outs RLHF_FnTok:$result);
  let assemblyFormat = "$input `,` $discount `,` $mask attr-dict `:` type($result)";
}

def RLHF_MaskOfOp : RLHF_FnOp<"mask_of"> {
  let summary = "the mask a batch tensor carries";
  let description = [{
    Of token ids: 1 at the tokens the sequences generated (their non-pad
    tokens when they were not generated). Of a per-token input: the mask of
    the call that produced it (a generation's, for logprobs and values).
    Aligned with per-token values; the operand is an argument of the body.
  }];
  let arguments = (ins AnyTypeOf<[RLHF_FnTokens, RLHF_FnTok]>:$input);
  let results = (outs RLHF_FnTok:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def RLHF_ModelOutputOp : RLHF_FnOp<"model_output"> {
  let summary = "the trained model's outputs on sequences, in a loss";
  let description = [{
    Differentiable outputs of the model an `rlhf.train_step` trains, on its
    current weights: `logprobs` of the given tokens or per-token `entropy`
    (lm head), per-token `values` or the sequence `score` (value head). Pure:
    two reads of one output on the same tokens are one forward pass.

    ```mlir
    %lp = rlhf.model_output logprobs %seq : tensor<?x?xi32> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins RLHF_ModelOutputAttr:$output, RLHF_FnTokens:$tokens);
  let results = (outs AnyTypeOf<[RLHF_FnSeq, RLHF_FnTok]>:$result);
  let assemblyFormat = "custom<EnumKeyword>($output) $tokens attr-dict `:` type($tokens) `->` type($result)";
  let hasVerifier = 1;
}

#endif // RLHF_FNOPS_TD
