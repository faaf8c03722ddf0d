//===- Checkpoint.cpp - layout-independent checkpoints --------------------===//

#include "rlhf/runtime/Checkpoint.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/SafeTensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sys/stat.h>

using namespace rlhf;

namespace {

const Layout kRankZero{0, 1, 1, 1};

void writeAtomically(const std::string &path,
                     const std::function<void(const std::string &)> &w) {
  std::string tmp = path + ".tmp";
  try {
    w(tmp);
  } catch (const Error &) {
    std::remove(tmp.c_str()); // a partial file would only take space
    throw;
  }
  errno = 0;
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error("cannot rename '" + tmp + "' to '" + path + "'" + ioReason());
}

/// Optimizer moments of parameters this rank holds but Adam has not touched
/// yet are zero.
ParamMap moments(const ParamMap &params, const Adam *opt, bool second) {
  ParamMap out;
  for (auto &[n, p] : params) {
    const auto &src = second ? opt->moments2() : opt->moments1();
    auto it = src.find(n);
    out[n] = it != src.end() && it->second.defined() ? it->second.cpu()
                                                     : at::zeros_like(p);
  }
  return out;
}

/// `mine` detached, on the host and fp32: Adam's master weights where it
/// keeps them (bf16 runs), so what is saved continues a run exactly.
ParamMap hostWeights(const ParamMap &mine, const Adam *opt) {
  ParamMap detached;
  for (auto &[n, p] : mine) {
    at::Tensor w = p.detach();
    if (opt)
      if (auto it = opt->masterWeights().find(n);
          it != opt->masterWeights().end() && it->second.defined())
        w = it->second;
    detached[n] = w.to(at::kCPU, at::kFloat);
  }
  return detached;
}

/// "[4, 64]".
std::string shapeText(at::IntArrayRef s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

/// Throws unless `full` holds exactly the model's parameters, each of its
/// shape: state.json records only layers and hidden, and a vocabulary, ffn
/// or head of another size would fail later inside a slice, unnamed.
void checkSameParams(const std::string &dir, const ParamMap &full,
                     const ModelConfig &cfg) {
  auto differs = [&](const std::string &what) {
    return Error("checkpoint '" + dir +
                 "' is of a different architecture: " + what +
                 "; resume it with the program that wrote it, or "
                 "start this one afresh in another --out directory");
  };
  std::vector<ParamSpec> specs = llamaParams(cfg.shape);
  for (const ParamSpec &p : specs) {
    auto it = full.find(p.name);
    if (it == full.end())
      throw differs("it has no '" + p.name + "'");
    std::vector<int64_t> want = p.vector()
                                    ? std::vector<int64_t>{p.rows}
                                    : std::vector<int64_t>{p.rows, p.cols};
    if (it->second.sizes().vec() != want)
      throw differs("'" + p.name + "' is " + shapeText(it->second.sizes()) +
                    " there and " + shapeText(want) + " here");
  }
  if (full.size() != specs.size())
    for (auto &[n, t] : full)
      if (std::none_of(specs.begin(), specs.end(),
                       [&](const ParamSpec &p) { return p.name == n; }))
        throw differs("it has '" + n + "', which this model lacks");
}

} // namespace

ParamMap rlhf::gatherWeights(const ModelConfig &cfg, const ParamMap &mine,
                             const Adam *opt, const Layout &layout,
                             Communicator &world) {
  return reallocate(cfg, hostWeights(mine, opt), layout, kRankZero, world);
}

void rlhf::saveCheckpoint(const std::string &dir, const ModelConfig &cfg,
                          const ParamMap &mine, const Adam *opt,
                          const Layout &layout, Communicator &world,
                          int64_t step) {
  // Gathered through host memory: a whole model's weights and moments need
  // not fit on rank 0's GPU.
  ParamMap detached = hostWeights(mine, opt);
  ParamMap full = reallocate(cfg, detached, layout, kRankZero, world);
  ParamMap m, v;
  if (opt) {
    m = reallocate(cfg, moments(detached, opt, false), layout, kRankZero,
                   world);
    v = reallocate(cfg, moments(detached, opt, true), layout, kRankZero, world);
  }
  // Adam's step count, from the ranks that train the model: rank 0 may lie
  // outside its train mesh (its own Adam never stepped), and a resumed
  // Adam with a bias correction from step 1 would change the run.
  int64_t adamSteps = 0;
  if (opt) {
    at::Tensor all = world.allGather(at::tensor(
        {double(opt->steps())}, at::TensorOptions().dtype(at::kDouble)));
    adamSteps = int64_t(all.max().item<double>());
  }
  if (world.rank() == 0) {
    ::mkdir(dir.c_str(), 0755);
    writeAtomically(dir + "/model.safetensors",
                    [&](const std::string &p) { saveSafetensors(p, full); });
    if (opt)
      writeAtomically(dir + "/optimizer.safetensors",
                      [&](const std::string &p) {
                        ParamMap both;
                        for (auto &[n, t] : m)
                          both["exp_avg." + n] = t;
                        for (auto &[n, t] : v)
                          both["exp_avg_sq." + n] = t;
                        saveSafetensors(p, both);
                      });
    nlohmann::json state{{"step", step},
                         {"adam_steps", adamSteps},
                         {"layers", cfg.shape.layers},
                         {"hidden", cfg.shape.hidden}};
    writeAtomically(dir + "/state.json", [&](const std::string &p) {
      writeTextFile(p, state.dump(2));
    });
  }
  world.barrier();
}

CheckpointState rlhf::loadCheckpoint(const std::string &dir,
                                     const ModelConfig &cfg,
                                     const Layout &layout,
                                     Communicator &world) {
  CheckpointState st;
  ParamMap full, m, v;
  bool hasOpt = false;
  if (world.rank() == 0) {
    std::ifstream in(dir + "/state.json");
    if (!in)
      throw Error("no checkpoint in '" + dir + "' (state.json is missing)");
    nlohmann::json state = nlohmann::json::parse(in, nullptr, false);
    auto integer = [&](const char *key) {
      return state.contains(key) && state[key].is_number_integer();
    };
    if (state.is_discarded() || !state.is_object() || !integer("step") ||
        (state.contains("adam_steps") && !integer("adam_steps")))
      throw Error("checkpoint '" + dir +
                  "/state.json' is not valid (it needs an integer \"step\" "
                  "and \"adam_steps\"); resume from an earlier step-N "
                  "(write N to checkpoints/latest)");
    if (!integer("layers") || !integer("hidden") ||
        state["layers"].get<int64_t>() != cfg.shape.layers ||
        state["hidden"].get<int64_t>() != cfg.shape.hidden)
      throw Error("checkpoint '" + dir + "' is of a different architecture");
    st.step = state["step"].get<int64_t>();
    st.adamSteps = state.value("adam_steps", int64_t(0));
    full = loadSafetensors(dir + "/model.safetensors");
    for (auto &[n, t] : full)
      t = t.to(at::kFloat);
    checkSameParams(dir, full, cfg);
    // A diverged run's weights would train on as nan; say so here, where
    // the fix (an earlier checkpoint) is plain.
    for (auto &[n, t] : full)
      if (!at::isfinite(t).all().item<bool>())
        throw Error("checkpoint '" + dir + "' holds non-finite weights (" + n +
                    "): the run had diverged when it was saved; resume "
                    "from an earlier step-N (write N to checkpoints/latest)");
    std::ifstream optFile(dir + "/optimizer.safetensors");
    // Adam's moments restarting from zero would silently change the run.
    if (!optFile && st.adamSteps > 0)
      throw Error("checkpoint '" + dir +
                  "' has no optimizer.safetensors, "
                  "though Adam had taken " +
                  std::to_string(st.adamSteps) +
                  " steps; resume from an earlier step-N (write N to "
                  "checkpoints/latest)");
    if (optFile) {
      hasOpt = true;
      const std::string file = dir + "/optimizer.safetensors";
      for (auto &[n, t] : loadSafetensors(file)) {
        if (n.rfind("exp_avg_sq.", 0) == 0)
          v[n.substr(11)] = t;
        else if (n.rfind("exp_avg.", 0) == 0)
          m[n.substr(8)] = t;
      }
      // Each weight's two moments, of its shape: the reallocation below
      // would otherwise fail with a message about its plan.
      for (auto &[n, t] : full)
        for (auto [prefix, moments] :
             {std::pair{"exp_avg.", &m}, std::pair{"exp_avg_sq.", &v}}) {
          const std::string key = prefix + n;
          auto it = moments->find(n);
          if (it == moments->end())
            throw Error("checkpoint '" + file + "' has no '" + key +
                        "'; resume from an earlier step-N (write N to "
                        "checkpoints/latest)");
          if (it->second.sizes() != t.sizes())
            throw Error("checkpoint '" + file + "': '" + key + "' is " +
                        shapeText(it->second.sizes()) + ", its weight " +
                        shapeText(t.sizes()) +
                        "; resume from an earlier step-N (write N to "
                        "checkpoints/latest)");
        }
    }
  }
  // Everyone learns the step and whether there is optimizer state.
  at::Tensor meta = at::tensor(
      {double(st.step), double(st.adamSteps), hasOpt ? 1.0 : 0.0}, at::kDouble);
  world.broadcast(meta, 0);
  st.step = int64_t(meta[0].item<double>());
  st.adamSteps = int64_t(meta[1].item<double>());
  hasOpt = meta[2].item<double>() > 0;
  st.params = reallocate(cfg, full, kRankZero, layout, world);
  if (hasOpt) {
    st.adamM = reallocate(cfg, m, kRankZero, layout, world);
    st.adamV = reallocate(cfg, v, kRankZero, layout, world);
  }
  return st;
}
