//===- RLHFOps.td - rlhf dialect operations ----------------*- tablegen -*-===//

#ifndef RLHF_OPS_TD
#define RLHF_OPS_TD

include "rlhf/IR/RLHFAttrs.td"
include "rlhf/IR/RLHFEnums.td"
include "rlhf/IR/RLHFTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A tensor with a #rlhf.kind encoding.
def RLHF_KindedTensor : Type<
    CPred<"::mlir::rlhf::getTensorKind($_self).has_value()">,
    "ranked tensor with a #rlhf.kind encoding", "::mlir::RankedTensorType">;

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

def RLHF_ClusterOp : RLHF_Op<"cluster", [Symbol]> {
  let summary = "declares the GPUs a program runs on";
  let description = [{
    `nodes` nodes of `gpus_per_node` GPUs each, all of one hardware preset.

    ```mlir
    rlhf.cluster @c nodes 2 gpus_per_node 8 hardware #rlhf.hardware<...>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$nodes,
                       I64Attr:$gpus_per_node, RLHF_HardwareAttr:$hardware);
  let assemblyFormat = [{
    $sym_name `nodes` $nodes `gpus_per_node` $gpus_per_node `hardware` $hardware
    attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumGpus() { return getNodes() * getGpusPerNode(); }
  }];
}

def RLHF_ModelOp : RLHF_Op<"model", [Symbol]> {
  let summary = "declares a model taking part in the algorithm";
  let description = [{
    A named LLM (actor, critic, reference, reward...) with its architecture
    and head. Calls refer to it by symbol. Only `trainable` models may be the
    target of `rlhf.train_step`; they may carry optimizer settings (without
    them the lowering trains with Adam at lr 1e-5, Sema's default). `tokenizer`
    names a sentencepiece model, relative to the file that declared it.

    ```mlir
    rlhf.model @actor #rlhf.arch<...> head lm trainable optimizer #rlhf.optimizer<...>
    rlhf.model @reward #rlhf.arch<...> head value tokenizer "tokenizer.model"
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, RLHF_ArchAttr:$arch,
                       RLHF_HeadAttr:$head, UnitAttr:$trainable,
                       OptionalAttr<RLHF_OptimizerAttr>:$optimizer,
                       OptionalAttr<StrAttr>:$checkpoint,
                       OptionalAttr<StrAttr>:$tokenizer);
  let assemblyFormat = [{
    $sym_name $arch `head` custom<EnumKeyword>($head) (`trainable` $trainable^)?
    (`optimizer` $optimizer^)? (`checkpoint` $checkpoint^)?
    (`tokenizer` $tokenizer^)? attr-dict
  }];
  let hasVerifier = 1;
}

def RLHF_DatasetOp : RLHF_Op<"dataset", [Symbol]> {
  let summary = "declares the dataset one iteration reads a batch of";
  let description = [{
    ```mlir
    rlhf.dataset @prompts "prompts.jsonl" : !rlhf.record<prompt: tensor<512x128xi32, #rlhf.kind<tokens>>>
    ```

    With `template`, each row's `prompt` text is the template with its
    `{column}` placeholders replaced by the row's columns (`{{` and `}}`
    stand for braces); the columns are read from the file beside the
    record's other fields.

    ```mlir
    rlhf.dataset @gsm "gsm.jsonl" template "Q: {question}\0AA:" : !rlhf.record<prompt: ..., answer: ...>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$path,
                       TypeAttrOf<RLHF_RecordType>:$batch_type,
                       OptionalAttr<StrAttr>:$prompt_template);
  let assemblyFormat = [{
    $sym_name $path (`template` $prompt_template^)? attr-dict `:` $batch_type
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The algorithm and its dataflow
//===----------------------------------------------------------------------===//

def RLHF_AlgorithmOp : RLHF_Op<"algorithm", [
    Symbol, SingleBlock, NoTerminator, IsolatedFromAbove,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one iteration of an RLHF algorithm, run `steps` times";
  let description = [{
    The region holds the dataflow of one iteration in program order: loads,
    model calls, host compute, and after planning the reallocations and
    transfers between them. Model calls refer to `rlhf.model` symbols of the
    enclosing module.

    ```mlir
    rlhf.algorithm @ppo cluster @c steps 20 seed 1 save_interval 10 {
      %b = rlhf.load @prompts : !rlhf.record<...>
      ...
    }
    ```

    `staleness k` (0 when absent: synchronous) lets generation run up to
    `k` iterations ahead of training: a generate of iteration t may read the
    weights the train steps of iteration t - k left. Each such generate
    carries the bound on its iteration-carried weight edge (`staleness`).

    `eval @d every N` scores the trained policy on held-out prompts: before
    the first step, every N steps (0: only then and at the end) and after
    the last, the ops the iteration's first scores depend on (the rewards
    of its generated samples) run over every row of dataset `@d` in batches,
    generating one greedy sample per prompt, or with `samples k` k samples
    drawn as the generate draws them (the means over all and of each
    prompt's best). A train step fed by loads alone (no generate, train
    step or ema before it) reports its loss and metrics instead, computed
    forward only on the rows of `@d` (a validation loss).
    `@d` has the fields of the dataset the iteration loads,
    none wider and no more rows per batch, so the plan's layouts and memory
    hold for it.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$cluster,
                       I64Attr:$steps, I64Attr:$seed, I64Attr:$save_interval,
                       DefaultValuedAttr<I64Attr, "0">:$staleness,
                       OptionalAttr<FlatSymbolRefAttr>:$eval,
                       DefaultValuedAttr<I64Attr, "0">:$eval_interval,
                       DefaultValuedAttr<I64Attr, "1">:$eval_samples);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `cluster` $cluster `steps` $steps `seed` $seed
    `save_interval` $save_interval (`staleness` $staleness^)?
    (`eval` $eval^ `every` $eval_interval)? (`samples` $eval_samples^)?
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// The cluster named by `cluster`; null only in unverified IR.
    ClusterOp getClusterOp();
  }];
}

def RLHF_LoadOp : RLHF_Op<"load", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads this iteration's rows from a dataset";
  let description = [{
    Reads the rows of the result's type from the dataset's seeded walk: the
    dataset's batch, or under `@filter_groups(gen_batch = N)` a round's N
    prompts, the walk going on from where the last round stopped. The
    fields and their lengths are the dataset's batch type's; only the row
    count may differ.

    ```mlir
    %b = rlhf.load @sums : !rlhf.record<prompt: tensor<48x5xi32, #rlhf.kind<tokens>>,
                                        answer: tensor<48x1xi32, #rlhf.kind<tokens>>>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$dataset);
  let results = (outs RLHF_RecordType:$batch);
  let assemblyFormat = "$dataset attr-dict `:` type($batch)";
}

def RLHF_FieldOp : RLHF_Op<"field", [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "takes one field of a record";
  let description = [{
    ```mlir
    %seq = rlhf.field %g["seq"] : !rlhf.record<seq: tensor<512x256xi32, #rlhf.kind<tokens>>, ...>
    ```
  }];
  let arguments = (ins RLHF_RecordType:$record, StrAttr:$name);
  let results = (outs RLHF_KindedTensor:$result);
  let assemblyFormat = [{
    $record `[` $name `]` attr-dict `:` type($record)
  }];
  
}

// Placement shared by the model calls: the planner (or a manual @place)
// fills mesh and strategy; `pinned` marks a placement the user chose, for
// the plan report and hovers (the planner keeps every placed call as it is,
// pinned or not).
class RLHF_CallOp<string mnemonic, list<Trait> traits = []> :
    RLHF_Op<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  dag placementArgs = (ins OptionalAttr<RLHF_MeshAttr>:$mesh,
                           OptionalAttr<RLHF_StrategyAttr>:$strategy,
                           UnitAttr:$pinned,
                           OptionalAttr<RLHF_CostAttr>:$cost);
  string placementFormat =
      "(`on` $mesh^)? (`as` $strategy^)? (`pinned` $pinned^)? (`cost` $cost^)?";
  let hasVerifier = 1;
}

def RLHF_GenerateOp : RLHF_CallOp<"generate"> {
  let summary = "samples continuations of prompts with an lm-head model";
  let description = [{
    Produces `n` samples per prompt: the prompts, the full sequences, the
    per-token logprobs of the sampled tokens (the behaviour policy's) and a
    mask of generated tokens.

    ```mlir
    %g = rlhf.generate @actor(%prompt) max_new_tokens 128 n 1 temperature 1.0 top_p 1.0
         : tensor<512x128xi32, #rlhf.kind<tokens>> -> !rlhf.record<...>
    ```

    `stale k` on a generate of a model the algorithm trains: it may run with
    weights up to `k` versions older than this iteration's (the algorithm's
    staleness), so its log-probs are a behaviour policy's.
  }];
  let arguments = !con((ins FlatSymbolRefAttr:$model, RLHF_KindedTensor:$prompt,
                            I64Attr:$max_new_tokens, I64Attr:$n,
                            F64Attr:$temperature, F64Attr:$top_p, UnitAttr:$greedy,
                            DefaultValuedAttr<I64Attr, "0">:$staleness),
                       placementArgs);
  let results = (outs RLHF_RecordType:$result);
  let assemblyFormat = "$model `(` $prompt `)` `max_new_tokens` $max_new_tokens "
      "`n` $n `temperature` $temperature `top_p` $top_p (`greedy` $greedy^)? "
      "(`stale` $staleness^)? " #
      placementFormat # " attr-dict `:` type($prompt) `->` type($result)";
}

def RLHF_InferenceOp : RLHF_CallOp<"inference"> {
  let summary = "a forward pass: logprobs (lm head) or values and scores";
  let description = [{
    ```mlir
    %r = rlhf.inference @reward(%seq) : tensor<...> -> !rlhf.record<...>
    ```
  }];
  let arguments = !con((ins FlatSymbolRefAttr:$model, RLHF_KindedTensor:$seq),
                       placementArgs);
  let results = (outs RLHF_RecordType:$result);
  let assemblyFormat = "$model `(` $seq `)` " # placementFormat #
      " attr-dict `:` type($seq) `->` type($result)";
}

def RLHF_TrainStepOp : RLHF_CallOp<"train_step", [IsolatedFromAbove]> {
  let summary = "one optimizer pass of a trainable model over the batch";
  let description = [{
    Runs forward and backward with the loss function `fn` on its inputs,
    split into `minibatches` optimizer steps, for `epochs` passes. The body
    is the loss, written in the language (the stdlib's `ppo_actor_loss`,
    `grpo_loss`, `sft_loss`... or the user's): one block whose arguments are
    the inputs and whose `rlhf.yield` gives the scalar loss, then any
    metrics, read from `rlhf.model_output`s of the trained model.

    ```mlir
    %s = rlhf.train_step @actor fn "sft_loss"(%seq) minibatches 1 epochs 1
         settings {} body {
    ^bb0(%t: tensor<?x?xi32>):
      %lp = rlhf.model_output logprobs %t : tensor<?x?xi32> -> tensor<?x?xf32>
      %nll = arith.negf %lp : tensor<?x?xf32>
      %m = rlhf.mask_of %t : tensor<?x?xi32> -> tensor<?x?xf32>
      %l = rlhf.reduce token mean %nll, %m : tensor<?x?xf32>, tensor<?x?xf32> -> f64
      rlhf.yield %l : f64
    } : tensor<...> -> <loss: tensor<f32, #rlhf.kind<loss>>>
    ```
  }];
  let arguments = !con((ins FlatSymbolRefAttr:$model, StrAttr:$fn,
                            Variadic<RLHF_KindedTensor>:$inputs,
                            I64Attr:$minibatches, I64Attr:$epochs,
                            DictionaryAttr:$settings),
                       placementArgs);
  let results = (outs RLHF_RecordType:$stats);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = "$model `fn` $fn `(` $inputs `)` `minibatches` "
      "$minibatches `epochs` $epochs `settings` $settings " # placementFormat #
      " `body` $body attr-dict `:` type($inputs) `->` type($stats)";
}

// Pure but for script_reward, which runs the user's programs: two identical
// calls must not be merged, nor an unused one dropped.
def RLHF_ComputeOp : RLHF_Op<"compute", [
    IsolatedFromAbove, AlwaysSpeculatable,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "a host function: advantages, rewards or reward shaping";
  let description = [{
    Runs on the controller over gathered batches. A function written in the
    language (kind `fn`, named by `fn`: the stdlib's `gae`, `grpo_adv`...
    or the user's) is the body: one block whose arguments are the inputs
    (`tensor<?xf32>` per sequence, `tensor<?x?xf32>` per token,
    `tensor<?x?xi32>` token ids) and whose `rlhf.yield` gives one value per
    field of the result, in order.

    ```mlir
    %adv = rlhf.compute fn "grpo_adv"(%score) {} body {
    ^bb0(%s: tensor<?xf32>):
      %mean = rlhf.reduce group mean %s {group = 8 : i64} : tensor<?xf32> -> tensor<?xf32>
      ...
      rlhf.yield %a : tensor<?xf32>
    } : (tensor<64xf32, #rlhf.kind<score>>) -> !rlhf.record<...>
    ```

    `exact_match` and `script_reward` compare decoded text with the
    dataset's answers, which the language cannot express; they have no
    body, and `settings` holds their options.
  }];
  let arguments = (ins RLHF_ComputeKindAttr:$kind, OptionalAttr<StrAttr>:$fn,
                       Variadic<RLHF_KindedTensor>:$inputs,
                       DictionaryAttr:$settings);
  let results = (outs RLHF_RecordType:$result);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    custom<EnumKeyword>($kind) ($fn^)? `(` $inputs `)` $settings (`body` $body^)?
    attr-dict `:` functional-type($inputs, $result)
  }];
  let hasVerifier = 1;
}

def RLHF_EmaOp : RLHF_Op<"ema", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "moves a model's weights toward another's (parameter versions)";
  let description = [{
    `target = decay * target + (1 - decay) * source`, using the source's
    weights after this iteration's train steps. The runtime copies the
    source's weights into the target's layout and blends them there; in
    bf16 runs into fp32 master weights the target keeps. The planner prices
    both and the schedule pass sets `start` and `end` as on calls.

    ```mlir
    rlhf.ema @ref from @actor decay 0.995
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$target, FlatSymbolRefAttr:$source,
                       F64Attr:$decay);
  let assemblyFormat = "$target `from` $source `decay` $decay attr-dict";
}

//===----------------------------------------------------------------------===//
// Movement inserted by the planner
//===----------------------------------------------------------------------===//

def RLHF_ReallocOp : RLHF_Op<"realloc", [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "re-shards a model's parameters from one layout to another";
  let description = [{
    Moves the parameters of `source` laid out as (`from_mesh`, `from`) into
    `target` laid out as (`to_mesh`, `to`). The verifier lets `source` and
    `target` differ if they share an architecture, but the runtime moves a
    model onto itself only: `rlhf-lower-to-runtime` refuses any other pair.

    ```mlir
    rlhf.realloc @actor on #rlhf.mesh<0, 16> as #rlhf.strategy<dp = 2, tp = 8, pp = 1, mbs = 1>
        to @actor on #rlhf.mesh<0, 16> as #rlhf.strategy<dp = 16, tp = 1, pp = 1, mbs = 1>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, RLHF_MeshAttr:$from_mesh,
                       RLHF_StrategyAttr:$from,
                       FlatSymbolRefAttr:$target, RLHF_MeshAttr:$to_mesh,
                       RLHF_StrategyAttr:$to, OptionalAttr<RLHF_CostAttr>:$cost);
  let assemblyFormat = [{
    $source `on` $from_mesh `as` $from `to` $target `on` $to_mesh `as` $to
    (`cost` $cost^)? attr-dict
  }];
  let hasVerifier = 1;
}

def RLHF_WeightUpdateOp : RLHF_Op<"weight_update", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copies a trainer's new weights into its generator's layout";
  let description = [{
    The versioned reallocation of an asynchronous plan (algorithm staleness
    k > 0). After the last trainer call of `source` in an iteration, the
    weights it leaves (the next version) are copied from the trainer's
    layout (`from_mesh`, `from`) into the layout of the generator
    (`to_mesh`, `to`), which keeps its own copy and may run up to
    `version_lag` versions behind the trainer. Unlike `rlhf.realloc` the
    trainer keeps its weights: both copies stay resident.

    ```mlir
    rlhf.weight_update @actor version_lag 1
        on #rlhf.mesh<0, 8> as #rlhf.strategy<dp = 1, tp = 1, pp = 8, mbs = 32>
        to @actor on #rlhf.mesh<8, 8> as #rlhf.strategy<dp = 2, tp = 4, pp = 1, mbs = 1>
    ```

    `version_lag` is between 1 and the algorithm's staleness, and the two
    layouts differ (a generator in the trainer's layout reads its weights
    and needs no update).
  }];
  let arguments = (ins FlatSymbolRefAttr:$source, I64Attr:$version_lag,
                       RLHF_MeshAttr:$from_mesh, RLHF_StrategyAttr:$from,
                       FlatSymbolRefAttr:$target, RLHF_MeshAttr:$to_mesh,
                       RLHF_StrategyAttr:$to, OptionalAttr<RLHF_CostAttr>:$cost);
  let assemblyFormat = [{
    $source `version_lag` $version_lag `on` $from_mesh `as` $from
    `to` $target `on` $to_mesh `as` $to (`cost` $cost^)? attr-dict
  }];
  let hasVerifier = 1;
}

class RLHF_HostMoveOp<string mnemonic> : RLHF_Op<mnemonic, [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let arguments = (ins FlatSymbolRefAttr:$model, RLHF_MeshAttr:$mesh,
                       RLHF_StrategyAttr:$strategy, OptionalAttr<RLHF_CostAttr>:$cost);
  let assemblyFormat = [{
    $model `on` $mesh `as` $strategy (`cost` $cost^)? attr-dict
  }];
}

def RLHF_OnloadOp : RLHF_HostMoveOp<"onload"> {
  let summary = "loads an offloaded model's weights from host memory";
  let description = [{
    Copies each rank's shard of a frozen model, kept in host memory, onto
    its GPU in the layout (`mesh`, `strategy`) of the call that follows.
    The strategy has `offload = true`; the model is not trainable.

    ```mlir
    rlhf.onload @ref on #rlhf.mesh<0, 16> as #rlhf.strategy<dp = 2, tp = 8, pp = 1, mbs = 1, offload = true>
    ```
  }];
}

def RLHF_OffloadOp : RLHF_HostMoveOp<"offload"> {
  let summary = "releases an offloaded model's weights from its GPUs";
  let description = [{
    Frees the GPU copy of a frozen model's weights after its call; the host
    copy stays, so nothing is copied back.

    ```mlir
    rlhf.offload @ref on #rlhf.mesh<0, 16> as #rlhf.strategy<dp = 2, tp = 8, pp = 1, mbs = 1, offload = true>
    ```
  }];
}

def RLHF_TransferOp : RLHF_Op<"transfer", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "moves a tensor's rows between layouts";
  let description = [{
    From the producer's data-parallel heads (`from_dp` of them on `from`) to
    the consumer's ranks (`to_dp` groups on `to`): each data-parallel group
    holds a contiguous share of the rows. A change of dp on one mesh moves
    rows too; a move to the same mesh and dp is an error.

    ```mlir
    %s2 = rlhf.transfer %s from <0, 8> dp 1 to <8, 8> dp 8 : tensor<...>
    ```
  }];
  let arguments = (ins RLHF_KindedTensor:$input, RLHF_MeshAttr:$from,
                       ConfinedAttr<I64Attr, [IntPositive]>:$from_dp,
                       RLHF_MeshAttr:$to,
                       ConfinedAttr<I64Attr, [IntPositive]>:$to_dp,
                       OptionalAttr<RLHF_CostAttr>:$cost);
  let results = (outs RLHF_KindedTensor:$result);
  let assemblyFormat = [{
    $input `from` $from `dp` $from_dp `to` $to `dp` $to_dp (`cost` $cost^)?
    attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def RLHF_FilterGroupsOp : RLHF_Op<"filter_groups", [
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "dynamic sampling: keeps the prompts whose samples score differently";
  let description = [{
    DAPO's dynamic sampling. `metric` scores the samples of one generate,
    `group` per prompt. A prompt whose group of scores has a standard
    deviation of at most `min_std` carries no signal for group-relative
    advantages: the iteration drops it. The ops that `values` depend on
    (the batch's load, the generate, the scoring) run again on the
    dataset's next rows until `prompts` groups vary, or `max_rounds`
    rounds were drawn (the rest is then filled with groups that did not
    vary, with a warning). Without `prompts` a round keeps as many prompts
    as it draws; with it, a round draws more (or fewer) than it keeps:
    verl's `gen_batch_size` beside `train_batch_size`. Each result is its
    operand's kept rows: rows of a per-prompt value (the batch) by prompt,
    rows of a per-sample value by group.

    The planner prices the ops it repeats `expected_rounds` times per
    iteration (`rlhf::expectedRounds`); the runtime reports the measured
    mean at the end of a run.

    ```mlir
    %b2, %g2, %r2 = rlhf.filter_groups %score group 8 prompts 16 rounds 8
        min_std 0.0 expect 1.5 keep(%b, %g, %r)
        : tensor<384xf32, #rlhf.kind<score>>,
        !rlhf.record<...>, !rlhf.record<...>, !rlhf.record<...>
    ```
  }];
  let arguments = (ins RLHF_KindedTensor:$metric,
                       Variadic<RLHF_RecordType>:$values,
                       ConfinedAttr<I64Attr, [IntMinValue<2>]>:$group,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$prompts,
                       ConfinedAttr<I64Attr, [IntPositive]>:$max_rounds,
                       F64Attr:$min_std, F64Attr:$expected_rounds);
  let results = (outs Variadic<RLHF_RecordType>:$kept);
  let assemblyFormat = [{
    $metric `group` $group (`prompts` $prompts^)? `rounds` $max_rounds
    `min_std` $min_std `expect` $expected_rounds `keep` `(` $values `)`
    attr-dict `:` type($metric) `,` type($values)
  }];
  let extraClassDeclaration = [{
    /// Prompts a round draws: the metric's rows over `group`.
    int64_t getDrawnPrompts();
    /// Prompts the iteration keeps: `prompts`, else as many as drawn.
    int64_t getKeptPrompts();
  }];
  let hasVerifier = 1;
}

include "rlhf/IR/RLHFFnOps.td"

#endif // RLHF_OPS_TD
