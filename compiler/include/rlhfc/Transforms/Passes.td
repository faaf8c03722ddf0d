//===- Passes.td - rlhf planning passes --------------------*- tablegen -*-===//

#ifndef RLHFC_TRANSFORMS_PASSES_TD
#define RLHFC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def RLHFInferShapes : Pass<"rlhf-infer-shapes", "mlir::ModuleOp"> {
  let summary = "derive the record types of calls from their inputs";
  let description = [{
    Recomputes the result record of every `generate` (prompt length plus
    `max_new_tokens`, `n` samples per prompt), `inference` (logprobs for an
    lm head, values and scores for a value head), `exact_match` and
    `script_reward` (a `score` per sample), `field` and `transfer` from its
    operands, in program order, so hand-written or rewritten IR carries
    consistent shapes for the cost model. A `train_step`'s record (the loss
    and its metrics, scalars) does not depend on its inputs' shapes and is
    kept.
  }];
  let dependentDialects = ["mlir::rlhf::RLHFDialect"];
}

def RLHFSimplifyFns : Pass<"rlhf-simplify-fns", "mlir::ModuleOp"> {
  let summary = "fold constants, share subexpressions and drop dead code in "
                "function bodies";
  let description = [{
    Runs the canonicalization patterns of the loaded dialects (constant
    folding of `arith` and `math`, the rlhf ops' folds) and common
    subexpression elimination over the body of every `rlhf.compute` and
    `rlhf.train_step` of kind `fn`, so that a number parameter folds into
    its uses and a loss that reads `model.logprobs(seq)` twice runs the
    model once. Ops outside those bodies are left alone: the dataflow of the
    algorithm keeps every call the user wrote.
  }];
  let dependentDialects = ["mlir::rlhf::RLHFDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect"];
}

def RLHFAssignPlacement : Pass<"rlhf-assign-placement", "mlir::ModuleOp"> {
  let summary = "choose a device mesh and parallel strategy for every call";
  let description = [{
    Enumerates meshes (aligned power-of-two runs inside a node, any run of
    whole nodes) and strategies (dp, tp within a node, pp, micro-batches)
    per call, prices them with the cost model, and keeps the fastest few per
    mesh plus, for each layout another call of the same model has, the
    call's fastest strategy in it (a call that shares its model's layout
    needs no reallocation). It scores whole assignments with a simulator of
    unrolled iterations. `planner=search` enumerates
    exhaustively when the space is small; otherwise it runs seeded simulated
    annealing (single-call and whole-model mesh moves, restarts from the
    baselines and from plans that give each call, or each model when there
    are more than seven calls, all GPUs or one side of a cut at a node
    boundary), a
    descent to the local optimum, then a branch-and-bound polish of up to
    10x `budget` nodes. `heuristic`, `colocated` and `separated` are the
    ReaLHF-style, verl-like and OpenRLHF-like baselines; `manual` keeps the
    `@place` pins and requires one on every call. Pinned calls are never
    moved. Above 16 nodes the search plans a copy of the program on k times
    fewer nodes (at most 16), each call with a k-th of its batch, scales
    that plan up (runs of whole k-node blocks, k times the dp), keeps it or
    the best baseline on the whole cluster, and tries each call's other
    strategies on its mesh (where no k splits every batch, it searches
    runs of whole blocks directly, more slowly). The planners take clusters of at most 512 nodes
    (a located error on the cluster above that; pin every call and use
    `manual`). Every train strategy with dp·sp > 1
    comes with and without ZeRO-1, which slices the optimizer step as well
    as its state and can be the faster of the two. Memory savers cost time,
    so the search offers them only where needed: recomputing activations to
    a train call that fits no other way, and, when no plan fits, offloading
    frozen models and recomputing in a second round.
  }];
  let options = [
    Option<"planner", "planner", "std::string", /*default=*/"\"search\"",
           "search, heuristic, colocated, separated or manual">,
    Option<"budget", "budget", "int64_t", /*default=*/"200000",
           "assignments the annealing search may simulate (the polish "
           "gets 10x as many nodes)">,
    Option<"seed", "seed", "uint64_t", /*default=*/"1", "search seed">,
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "JSON file of efficiency factors (docs/cost-model.md)">,
    Option<"progress", "progress", "bool", /*default=*/"false",
           "report the search's stage and best plan so far on stderr">,
  ];
}

def RLHFInsertRealloc : Pass<"rlhf-insert-realloc", "mlir::ModuleOp"> {
  let summary = "insert parameter reallocation where a model's layout changes";
  let description = [{
    Tracks each model's parameter layout through one iteration, starting
    from the layout of its last call (the layout carried into the next
    iteration), and inserts `rlhf.realloc` before every call whose mesh or
    strategy differs from the current one, priced from the slice-level plan.
    A call whose strategy has `offload = true` (a frozen model whose weights
    rest in host memory) gets `rlhf.onload` before it, priced as a copy over
    every GPU's host link, and `rlhf.offload` after it, instead. The
    movements follow from the calls' layouts alone: the pass first removes
    those an earlier run inserted, so running it again changes nothing.
  }];
}

def RLHFInsertTransfer : Pass<"rlhf-insert-transfer", "mlir::ModuleOp"> {
  let summary = "insert data transfers between calls in different rows layouts";
  let description = [{
    Where a model call reads a tensor produced by a model call on another
    mesh, or on the same mesh with another dp degree (rows sit with dp
    groups), inserts `rlhf.transfer` and rewires the use. One transfer per
    value and destination (mesh, dp) serves every call there.
  }];
}

def RLHFCheckMemory : Pass<"rlhf-check-memory", "mlir::ModuleOp"> {
  let summary = "prove that predicted per-GPU memory fits";
  let description = [{
    Simulates the placed program and reports a located error for the first
    GPU whose predicted peak (resident weights, gradients and optimizer
    state of every co-resident model plus the largest working set of a call
    there) exceeds the usable memory (90% of the hardware's HBM; the rest
    is kept for the CUDA context, the caching allocator's slack and
    communication buffers), naming the models on it.
  }];
  let options = [
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "JSON file of efficiency factors">,
  ];
}

def RLHFEstimateCost : Pass<"rlhf-estimate-cost", "mlir::ModuleOp"> {
  let summary = "annotate placed calls with predicted time and memory";
  let description = [{
    Sets `#rlhf.cost<time, memory>` on every placed generate, inference and
    train_step (seconds, peak bytes per GPU).
  }];
  let options = [
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "JSON file of efficiency factors">,
  ];
}

def RLHFSchedule : Pass<"rlhf-schedule", "mlir::ModuleOp"> {
  let summary = "predict when every call runs";
  let description = [{
    Simulates three iterations of the placed program and records, on each
    call, its `start` and `end` in the first iteration (seconds), and on the
    algorithm the steady-state `iteration_time`.

    Under staleness k > 0, a generate that keeps its own copy of the weights
    also gets `weight_copy` and `in_flight` (bytes per GPU: its weights, and
    the k generated batches waiting for training), and the algorithm its
    `peak_memory` (bytes on the fullest GPU). `trace=FILE` writes the
    simulated iterations as Chrome trace JSON, where an asynchronous plan's
    iterations overlap.

    An algorithm with `eval @d` gets `eval_batch_time`: the seconds of one
    batch of `@d` through the ops that score samples, at its batch with one
    greedy sample per prompt, in the plan's layouts, with the reallocations
    before them made and undone.
  }];
  let options = [
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "JSON file of efficiency factors">,
    Option<"trace", "trace", "std::string", /*default=*/"\"\"",
           "write the simulated iterations as Chrome trace JSON to this file">,
  ];
}

def RLHFLowerToRuntime : Pass<"rlhf-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "lower a planned program to func/LLVM calls into the runtime";
  let description = [{
    Replaces the `rlhf` declarations and the planned algorithm with a `main`
    that builds the program from constants (architectures, optimizer
    settings, datasets, every call's layout, the predicted per-GPU memory)
    and loops over the steps, and an iteration function whose body calls
    the runtime's C ABI (`rlhf_program.h`) once per op: loads, fields,
    reallocations, transfers, generate, inference, train steps, host
    functions and EMA. Values become opaque `!llvm.ptr` handles. Every call
    must be placed (run the planning pipeline first).

    An `rlhf.filter_groups` makes the ops its operands depend on a loop
    (`rlhf_filter_round` asks for another batch); reallocations and
    offloads between them are undone before each further round, and those
    before its first call are hoisted out of the loop.

    An algorithm with `eval @d` also gets an eval function,
    `__rlhf_eval_<algorithm>(prog, batch)`, registered with
    `rlhf_prog_set_eval`: the ops its first-order rewards depend on, with
    the load reading batch `batch` of `@d`, generates sampling once,
    greedily, each reward passed to `rlhf_eval_score`, and the reallocations
    before them undone at the end.

    Relative dataset paths are resolved against the directory of the
    `.rlhf` file that declares them.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::func::FuncDialect",
                           "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::cf::ControlFlowDialect"];
}

#endif // RLHFC_TRANSFORMS_PASSES_TD
