//===- SemaOptimizer.cpp - optimizer settings and learning-rate schedules -===//
//
// `optimizer = adam(lr = 1e-6, warmup_steps = 10, schedule = cosine,
// min_lr = 1e-7)`: Adam's settings, and the learning rate per iteration as
// Megatron's and verl's schedulers give it. Whether a schedule fits the run
// is checked per run, since the run sets the steps it decays over.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include "rlhfc/Frontend/Units.h"

#include "rlhf/IR/RLHFOps.h"
#include "rlhf/runtime/LrScheduleNames.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

void Sema::parseOptimizer(const Expr &e, Optimizer &o) {
  if (e.kind != Expr::Kind::Call || e.base->kind != Expr::Kind::Name) {
    error(e.loc, "optimizer must be a call such as 'adam(lr = 1e-6)'");
    return;
  }
  if (e.base->text != "adam" && e.base->text != "adamw") {
    error(e.base->loc,
          "unknown optimizer '" + e.base->text + "'; supported: adam, adamw");
    return;
  }
  o.kind = e.base->text;
  o.loc = e.loc;
  double warmup = 0, decay = 0;
  readNamedNumbers(e,
                   {{"lr", &o.lr},
                    {"beta1", &o.beta1},
                    {"beta2", &o.beta2},
                    {"eps", &o.eps},
                    {"weight_decay", &o.weightDecay},
                    {"grad_clip", &o.gradClip},
                    {"warmup_steps", &warmup},
                    {"decay_steps", &decay},
                    {"min_lr", &o.minLr}},
                   "optimizer", "lr = 1e-6", /*zeroAllowed=*/true,
                   /*others=*/{"schedule"});
  const Arg *minLrArg = nullptr, *decayArg = nullptr;
  for (const Arg &a : e.args) {
    // Adam's moments average with weight beta: at 1 or more they never
    // forget, or grow without bound (torch.optim.Adam's check too).
    if (a.name == "beta1" || a.name == "beta2")
      if (double b = a.name == "beta1" ? o.beta1 : o.beta2; b >= 1)
        error(a.value->loc, formatv("'{0}' must be below 1, as in {1}", a.name,
                                    a.name == "beta1" ? "0.9" : "0.95"));
    if (a.name == "warmup_steps" || a.name == "decay_steps") {
      double v = a.name == "warmup_steps" ? warmup : decay;
      // Negative ones readNamedNumbers reported; converting one past
      // int64's range would be undefined.
      if (v != std::floor(v) || v > double(mlir::rlhf::kMaxSteps))
        error(a.value->loc,
              formatv("'{0}' counts iterations: a whole number up to {1}",
                      a.name, mlir::rlhf::kMaxSteps));
      else if (a.name == "decay_steps" && v < 1)
        error(a.value->loc, "'decay_steps' must be at least 1; leave it out "
                            "to decay over the run's steps");
      else if (v >= 0)
        (a.name == "warmup_steps" ? o.warmupSteps : o.decaySteps) = int64_t(v);
    }
    if (a.name == "min_lr")
      minLrArg = &a;
    if (a.name == "decay_steps")
      decayArg = &a;
    if (a.name != "schedule")
      continue;
    std::optional<std::string> name = evalName(*a.value, "'schedule'");
    if (!name)
      continue;
    if (!llvm::is_contained(rlhf::kLrScheduleNames, *name)) {
      std::vector<std::string> known(std::begin(rlhf::kLrScheduleNames),
                                     std::end(rlhf::kLrScheduleNames));
      error(a.value->loc,
            formatv("unknown schedule '{0}'; supported: {1}{2}", *name,
                    llvm::join(known, ", "), didYouMean(*name, known)));
      continue;
    }
    o.schedule = *name;
  }
  if (minLrArg && o.minLr > o.lr)
    error(minLrArg->value->loc,
          formatv("'min_lr' ({0}) is above 'lr' ({1}): the schedule decays "
                  "from lr down to min_lr",
                  formatNumber(o.minLr), formatNumber(o.lr)));
  // A constant rate never decays: the settings of a decay would be unused.
  if (o.schedule == "constant")
    for (const Arg *a : {minLrArg, decayArg})
      if (a)
        warning(a->loc, "'" + a->name +
                            "' is unused with the constant schedule; add "
                            "'schedule = cosine' (or linear) to decay");
}

void Sema::checkSchedules(const Instance &inst) {
  const int64_t steps = inst.settings.steps;
  if (steps < 1) // the run's own error says why
    return;
  // A model starts training once: its train calls share `frozen_steps`, and
  // its schedule counts the iterations it trains (as verl's and OpenRLHF's
  // schedulers step only with the model's updates).
  llvm::DenseMap<const Model *, const Node *> firstTrain;
  for (const Node &n : inst.nodes) {
    if (n.kind != Node::Kind::Train)
      continue;
    auto [it, fresh] = firstTrain.try_emplace(n.model, &n);
    const double k = n.attr("frozen_steps", 0),
                 first = it->second->attr("frozen_steps", 0);
    if (k >= steps)
      warning(n.loc, formatv("'{0}' stays frozen for {1} steps, but the run "
                             "of '{2}' has {3}: this call never trains it",
                             n.model->name, int64_t(k), inst.algorithm, steps));
    if (!fresh && k != first)
      error(n.loc, formatv("'{0}' is frozen for {1} steps here but {2} at "
                           "its first train call; a model starts training "
                           "once, so give its train calls the same "
                           "'frozen_steps'",
                           n.model->name, int64_t(k), int64_t(first)))
              .attachNote(it->second->loc)
          << "its first train call is here";
  }
  auto frozenOf = [&](const Model *m) -> int64_t {
    auto it = firstTrain.find(m);
    return it == firstTrain.end()
               ? 0
               : int64_t(it->second->attr("frozen_steps", 0));
  };
  for (const Model *m : inst.models) {
    const Optimizer &o = m->optimizer;
    const int64_t frozen = frozenOf(m), trained = steps - frozen;
    if (!m->trainable || !o.scheduled() || !o.loc || trained < 1)
      continue;
    if (o.schedule == "constant") {
      if (o.warmupSteps > trained)
        warning(mlir::Location(o.loc),
                frozen ? formatv("'{0}' warms up over {1} iterations, but it "
                                 "trains in {2} of the {3} of '{4}' (frozen "
                                 "for {5}): its learning rate never reaches lr",
                                 m->name, o.warmupSteps, trained, steps,
                                 inst.algorithm, frozen)
                             .str()
                       : formatv("'{0}' warms up over {1} iterations, but the "
                                 "run of '{2}' has {3}: its learning rate "
                                 "never reaches lr",
                                 m->name, o.warmupSteps, inst.algorithm, steps)
                             .str());
      continue;
    }
    int64_t decay = o.decaySteps ? o.decaySteps : trained;
    if (o.warmupSteps >= decay)
      error(mlir::Location(o.loc),
            formatv("'{0}' warms up over {1} iterations, which leaves none "
                    "of the {2} its {3} schedule decays over ({4}); lower "
                    "'warmup_steps' or raise '{5}'",
                    m->name, o.warmupSteps, decay, o.schedule,
                    o.decaySteps ? "'decay_steps'"
                    : frozen     ? "the run's steps less 'frozen_steps'"
                                 : "the run's steps",
                    o.decaySteps ? "decay_steps" : "steps"))
              .attachNote(mlir::Location(inst.loc))
          << "the run is here";
  }
}
