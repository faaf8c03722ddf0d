//===- SimulateAsync.cpp - steady state with generation running ahead -----===//
//
// Under staleness k > 0 a generate of a trained model reads weights up to k
// versions old. When it runs in a layout other than its model's trainer
// layout (the layout of the model's other calls) it keeps its own copy of
// the weights, and:
//  - generation of iteration t waits for version t - k only, not for the
//    training of iteration t - 1: the simulator issues it k iterations
//    early, so it overlaps training wherever the meshes are disjoint; on
//    shared GPUs calls still serialise (they interleave, nothing overlaps);
//  - after the model's last trainer call of iteration t, a weight update
//    copies version t + 1 from the trainer's layout into the generator's.
//    It is priced as the reallocation between the two layouts (the same
//    slice plan; a copy, since the trainer keeps its weights).
//
// Contention assumption: the update has the links of the GPUs at both ends
// to itself. It starts once the version exists and both meshes are idle,
// and it occupies every GPU it touches for its whole time: no call runs
// beside it there, so it shares no NVLink or NIC bandwidth with a
// collective, and the generator overwrites its weights in place between
// batches (no staging copy). It overlaps only the calls on GPUs outside
// both meshes. Overlapping it with compute on its own GPUs would need a
// staging copy on the generator and would share the links with that
// compute's collectives; we do not assume either.
//
// Memory: the generator's copy rests on its mesh next to the trainer's
// weights, and k generated batches wait on the generator's GPUs for the
// trainer side.
//
//===----------------------------------------------------------------------===//

#include "SimulateImpl.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;

namespace {

/// Per model, its last call that is not a weight-owning generate (-1: none).
std::vector<int> trainerLastCalls(const Problem &p,
                                  const std::vector<char> &owns) {
  std::vector<int> last(p.models.size(), -1);
  for (size_t c = 0; c < p.calls.size(); ++c)
    if (!p.calls[c].host && !owns[c])
      last[p.calls[c].model] = int(c);
  return last;
}

} // namespace

bool plan::ownsWeightCopy(const Problem &p, const Assignment &a, size_t c) {
  const Call &call = p.calls[c];
  if (p.staleness <= 0 || call.host || call.stale <= 0 || a[c] < 0)
    return false;
  // Issued k iterations early, it may read nothing computed in the
  // iteration (a generate reads only the data set's prompts).
  if (llvm::any_of(call.deps, [&](auto d) { return !p.calls[d.first].host; }))
    return false;
  int last = -1;
  for (size_t o = 0; o < p.calls.size(); ++o)
    if (o != c && !p.calls[o].host && p.calls[o].model == call.model)
      last = int(o);
  if (last < 0 || a[last] < 0)
    return false;
  const Candidate &g = p.cands[c][a[c]], &t = p.cands[last][a[last]];
  return !g.s.offload && !t.s.offload && !cost::sameLayout(g.s, t.s);
}

SimResult plan::simulateAsync(const Problem &p, const Assignment &a,
                              int iterations, bool record) {
  SimResult r;
  const size_t n = p.calls.size();
  const int k = int(p.staleness);
  // k iterations of warm-up and k more of drain around those measured.
  const int total = iterations + 2 * k;
  detail::GpuTimeline gpus(p.gpus);
  auto cand = [&](size_t c) -> const Candidate & { return p.cands[c][a[c]]; };

  std::vector<char> owns(n, 0);
  std::vector<int> genOf(p.models.size(), -1); // the model's owning generate
  for (size_t c = 0; c < n; ++c)
    if ((owns[c] = ownsWeightCopy(p, a, c)))
      genOf[p.calls[c].model] = int(c);
  std::vector<int> trainerLast = trainerLastCalls(p, owns);

  // The trainer chain carries each model's weights in the layout of its last
  // call, as in the synchronous simulator.
  std::vector<const Candidate *> layout(p.models.size(), nullptr);
  for (size_t c = 0; c < n; ++c)
    if (!p.calls[c].host && !owns[c])
      layout[p.calls[c].model] = cand(c).s.offload ? nullptr : &cand(c);
  detail::parkCallless(p, layout);
  std::vector<double> modelReady(p.models.size(), 0.0);
  // versionReady[m][v]: version v in the generator's layout (v = 0: the
  // initial weights, loaded into both layouts before the first iteration).
  std::vector<std::vector<double>> versionReady(
      p.models.size(), std::vector<double>(total + 1, 0.0));
  std::vector<std::vector<double>> finish(total, std::vector<double>(n, 0.0));
  std::vector<double> iterEnd(total, 0.0);
  double end = 0;

  detail::TransferMemo moved;
  auto dataReady = [&](size_t c, int it) {
    return detail::inputsReady(p, a, c, it, finish[size_t(it)],
                               record ? &r.events : nullptr, moved);
  };
  auto run = [&](size_t c, int it, double start) {
    const Candidate &x = cand(c);
    double stop = start + x.time;
    gpus.occupy(x.s.firstGpu, x.devices, stop);
    finish[it][c] = stop;
    iterEnd[it] = std::max(iterEnd[it], stop);
    end = std::max(end, stop);
    if (record) {
      if (x.s.offload) {
        r.events.push_back({Event::Load, int(c), it, start, start + x.load,
                            x.s.firstGpu, x.devices,
                            x.mem.weights * double(x.devices)});
        start += x.load;
      }
      r.events.push_back(
          {Event::Call, int(c), it, start, stop, x.s.firstGpu, x.devices, 0});
    }
    return stop;
  };
  auto generateAhead = [&](size_t c, int it) {
    int m = p.calls[c].model;
    const Candidate &x = cand(c);
    double params = versionReady[m][std::max(0, it - k)];
    run(c, it,
        std::max({dataReady(c, it), params,
                  gpus.busyUntil(x.s.firstGpu, x.devices)}));
  };

  for (int round = 0; round < total; ++round) {
    // Generation of iteration round + k (at the start, of 0..k) goes first:
    // it needs only version round, updated after iteration round - 1.
    for (int it = round == 0 ? 0 : round + k; it <= round + k && it < total;
         ++it)
      for (size_t c = 0; c < n; ++c)
        if (owns[c])
          generateAhead(c, it);
    for (size_t c = 0; c <= n; ++c) {
      double averaged = detail::runAverages(
          p, c, layout, modelReady, gpus, record ? &r.events : nullptr, round);
      end = std::max(end, averaged);
      iterEnd[round] = std::max(iterEnd[round], averaged);
      if (c == n)
        break;
      const Call &call = p.calls[c];
      if (owns[c])
        continue;
      double ready = dataReady(c, round);
      if (call.host) {
        finish[round][c] = ready + call.hostTime;
        if (record)
          r.events.push_back(
              {Event::Host, int(c), round, ready, finish[round][c], 0, 0, 0});
        continue;
      }
      const Candidate &x = cand(c);
      int m = call.model;
      double paramsReady = modelReady[m];
      if (!x.s.offload && !cost::sameLayout(layout[m]->s, x.s)) {
        const cost::MoveEstimate &mv = p.reallocMove(m, layout[m]->s, x.s);
        paramsReady = gpus.move(reallocSpan(*layout[m], x), paramsReady,
                                mv.time, record ? &r.events : nullptr,
                                Event::Realloc, int(c), round, mv.movedBytes());
        layout[m] = &x;
      }
      double stop = run(c, round,
                        std::max({ready, paramsReady,
                                  gpus.busyUntil(x.s.firstGpu, x.devices)}));
      modelReady[m] = stop;
      if (int g = genOf[m]; g >= 0 && int(c) == trainerLast[m]) {
        // Version round + 1 exists: copy it into the generator's layout.
        const Candidate &gen = cand(size_t(g));
        const cost::MoveEstimate &mv = p.reallocMove(m, x.s, gen.s);
        double updated = gpus.move(reallocSpan(x, gen), stop, mv.time,
                                   record ? &r.events : nullptr, Event::Update,
                                   g, round, mv.movedBytes());
        versionReady[m][round + 1] = updated;
        modelReady[m] = updated;
        end = std::max(end, updated);
      }
    }
  }
  r.makespan = end;
  // The rate over the iterations after the warm-up, each ending with its
  // last call (generation of later ones may already have run).
  const int from = k, to = total - 1 - k;
  r.iterationTime = to > from ? (iterEnd[to] - iterEnd[from]) / (to - from)
                              : iterEnd[total - 1];
  r.iterationTime = std::max(r.iterationTime, iterationBounds(p, a).max());

  // Memory: resting weights (the trainer's layout, and each owning
  // generate's copy on its mesh), optimizer state, k batches
  // in flight on each owning generate's GPUs, and the largest working set.
  detail::simulateMemory(p, a, layout, owns, k, record, r);
  return r;
}
