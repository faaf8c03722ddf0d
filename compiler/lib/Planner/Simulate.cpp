//===- Simulate.cpp - unrolled-iteration simulator of a placement ---------===//

#include "SimulateImpl.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;

SimResult plan::simulate(const Problem &p, const Assignment &a, int iterations,
                         bool record) {
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (ownsWeightCopy(p, a, c))
      return simulateAsync(p, a, iterations, record);
  SimResult r;
  const size_t n = p.calls.size();
  detail::GpuTimeline gpus(p.gpus);
  auto cand = [&](size_t c) -> const Candidate & { return p.cands[c][a[c]]; };

  // Parameters are loop-carried in the layout of each model's last call;
  // an offloaded model's rest in host memory (no layout).
  std::vector<const Candidate *> layout(p.models.size(), nullptr);
  for (size_t c = 0; c < n; ++c)
    if (!p.calls[c].host)
      layout[p.calls[c].model] = cand(c).s.offload ? nullptr : &cand(c);
  detail::parkCallless(p, layout);
  std::vector<double> modelReady(p.models.size(), 0.0);
  // Each model's latest call: a move between two calls that dynamic
  // sampling repeats is made every round and undone before the next.
  std::vector<int> latest(p.models.size(), -1);
  std::vector<double> finish(n, 0.0);
  detail::TransferMemo moved;
  double firstIterationEnd = 0, end = 0;

  for (int it = 0; it < iterations; ++it) {
    for (size_t c = 0; c <= n; ++c) {
      end =
          std::max(end, detail::runAverages(p, c, layout, modelReady, gpus,
                                            record ? &r.events : nullptr, it));
      if (c == n)
        break;
      const Call &call = p.calls[c];
      double ready = detail::inputsReady(p, a, c, it, finish,
                                         record ? &r.events : nullptr, moved);
      if (call.host) {
        finish[c] = ready + call.hostTime;
        if (record)
          r.events.push_back(
              {Event::Host, int(c), it, ready, finish[c], 0, 0, 0});
        continue;
      }
      const Candidate &k = cand(c);
      int m = call.model;
      double paramsReady = modelReady[m];
      if (!k.s.offload && !cost::sameLayout(layout[m]->s, k.s)) {
        const cost::MoveEstimate &mv = p.reallocMove(m, layout[m]->s, k.s);
        double moves = 1;
        if (latest[m] >= 0 && p.calls[size_t(latest[m])].shape.repeats > 1 &&
            call.shape.repeats > 1)
          moves = 2 * call.shape.repeats - 1;
        paramsReady =
            gpus.move(reallocSpan(*layout[m], k), paramsReady, moves * mv.time,
                      record ? &r.events : nullptr, Event::Realloc, int(c), it,
                      moves * mv.movedBytes());
        layout[m] = &k;
      }
      latest[m] = int(c);
      double start = std::max(
          {ready, paramsReady, gpus.busyUntil(k.s.firstGpu, k.devices)});
      double stop = start + k.time;
      gpus.occupy(k.s.firstGpu, k.devices, stop);
      modelReady[m] = stop;
      finish[c] = stop;
      end = std::max(end, stop);
      if (record && k.s.offload) {
        // The copy from host memory opens the call's span.
        double loaded = start + k.load;
        r.events.push_back({Event::Load, int(c), it, start, loaded,
                            k.s.firstGpu, k.devices,
                            k.mem.weights * double(k.devices)});
        start = loaded;
      }
      if (record)
        r.events.push_back(
            {Event::Call, int(c), it, start, stop, k.s.firstGpu, k.devices, 0});
    }
    if (it == 0)
      firstIterationEnd = end;
  }
  r.makespan = end;
  r.iterationTime =
      iterations > 1 ? (end - firstIterationEnd) / (iterations - 1) : end;
  // A few unrolled iterations can end before the steady state shows; no
  // schedule repeats faster than its busiest GPU or its longest cycle.
  r.iterationTime = std::max(r.iterationTime, iterationBounds(p, a).max());

  detail::simulateMemory(p, a, layout, {}, 0, record, r);
  return r;
}

void plan::detail::simulateMemory(const Problem &p, const Assignment &a,
                                  llvm::ArrayRef<const Candidate *> layout,
                                  llvm::ArrayRef<char> owns, int64_t inFlight,
                                  bool record, SimResult &r) {
  // Memory per GPU: each model's weights where its parameters rest between
  // iterations, its optimizer state where it trains, and on top the largest
  // working set of any call on that GPU (gradients live only in their train
  // call; with the call's own copy of the weights in another layout).
  // A call in another layout holds the reallocated weights instead of (not
  // on top of) its model's resting shard: reallocation keeps no copies.
  // A call that owns a weight copy (an async generate) keeps it resident on
  // its GPUs, with `inFlight` of its batches waiting to be trained.
  auto cand = [&](size_t c) -> const Candidate & { return p.cands[c][a[c]]; };
  auto owned = [&](size_t c) { return !owns.empty() && owns[c]; };
  auto homeWeights = [&](int m, int64_t g) {
    const Candidate *home = layout[m];
    return home && g >= home->s.firstGpu && g < home->s.firstGpu + home->devices
               ? home->mem.weights
               : 0.0;
  };
  auto workingSet = [&](size_t c, int64_t g) {
    const Candidate &k = cand(c);
    int m = p.calls[c].model;
    double work = k.mem.working();
    if (!owned(c) && (!layout[m] || !cost::sameLayout(layout[m]->s, k.s)))
      work += std::max(0.0, k.mem.weights - homeWeights(m, g));
    return work;
  };
  GpuRuns runs(p.gpus);
  for (const Candidate *home : layout)
    if (home)
      runs.cut(home->s.firstGpu, home->devices);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host)
      runs.cut(cand(c).s.firstGpu, cand(c).devices);
  runs.seal();
  std::vector<double> peak(runs.size(), 0.0), work(runs.size(), 0.0);
  // An ema target keeps fp32 master weights too (emaMasterBytes).
  std::vector<char> averaged(p.models.size(), 0);
  for (const Average &e : p.averages)
    averaged[e.target] = 1;
  for (size_t m = 0; m < layout.size(); ++m)
    if (const Candidate *home = layout[m])
      runs.each(home->s.firstGpu, home->devices, [&](size_t i) {
        peak[i] += home->mem.weights +
                   (averaged[m] ? plan::emaMasterBytes(home->mem.weights) : 0);
      });
  // While an ema runs, the target's GPUs hold the source's weights in the
  // target's layout, and the source's GPUs a copy of its shard.
  for (const Average &e : p.averages)
    for (const Candidate *k : {layout[e.target], layout[e.source]})
      if (k && layout[e.target] && layout[e.source])
        runs.each(k->s.firstGpu, k->devices, [&](size_t i) {
          work[i] = std::max(work[i], k->mem.weights);
        });
  for (size_t c = 0; c < p.calls.size(); ++c) {
    if (p.calls[c].host)
      continue;
    const Candidate &k = cand(c);
    double resting = 0;
    if (p.calls[c].shape.kind == cost::CallKind::Train)
      resting += k.mem.optimizer;
    if (owned(c))
      resting += k.mem.weights +
                 double(inFlight) * p.calls[c].outBytes / double(k.s.dp);
    // Every GPU of a run lies on or off the model's resting shard alike.
    runs.each(k.s.firstGpu, k.devices, [&](size_t i) {
      peak[i] += resting;
      work[i] = std::max(work[i], workingSet(c, runs.first(i)));
    });
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    peak[i] += work[i];
    if (peak[i] > p.memoryLimit && !r.oom) {
      r.oom = true;
      r.oomGpu = int(runs.first(i));
    }
  }
  r.peakMemory = runs.perGpu(peak);
  if (!record)
    return;
  std::vector<double> working = runs.perGpu(work);
  r.memoryTrace.assign(p.gpus, {});
  for (int64_t g = 0; g < p.gpus; ++g)
    r.memoryTrace[g].push_back({0.0, r.peakMemory[g] - working[g]});
  for (const Event &e : r.events) {
    if (e.kind != Event::Call && e.kind != Event::Load)
      continue;
    for (int64_t g = e.firstGpu; g < e.firstGpu + e.devices; ++g) {
      double base = r.peakMemory[g] - working[g];
      r.memoryTrace[g].push_back({e.start, base + workingSet(e.call, g)});
      r.memoryTrace[g].push_back({e.end, base});
    }
  }
  for (auto &tr : r.memoryTrace)
    std::stable_sort(tr.begin(), tr.end(),
                     [](auto &x, auto &y) { return x.first < y.first; });
}
