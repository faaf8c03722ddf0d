//===- Program.cpp - the executor behind compiled .rlhf programs ----------===//
//
// Implements rlhf_program.h. Batch values are either replicated on every
// rank (dataset batches, host-computed tensors) or split by rows over the
// data-parallel groups of the layout that produced them (model call
// results). A call that needs a value in another layout moves its rows with
// transferBatch; host functions first gather their inputs everywhere.
// Per-token tensors follow the runtime's convention: S-1 columns aligned with
// the predicted tokens, with a loss mask carried beside them.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/rlhf_program.h"

#include "rlhf/runtime/CharTokenizer.h"
#include "rlhf/runtime/Checkpoint.h"
#include "rlhf/runtime/Dataset.h"
#include "rlhf/runtime/Device.h"
#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/Groups.h"
#include "rlhf/runtime/HostCompute.h"
#include "rlhf/runtime/Model.h"
#include "rlhf/runtime/Realloc.h"
#include "rlhf/runtime/Tokenizer.h"
#include "rlhf/runtime/Trace.h"
#include "rlhf/runtime/Train.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <getopt.h>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <sys/resource.h>

using namespace rlhf;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct rlhf_value {
  // A record, or one tensor.
  std::map<std::string, rlhf_value *> fields;
  bool isRecord = false;
  at::Tensor t;     ///< this rank's rows (all rows when replicated)
  at::Tensor mask;  ///< [rows, S-1] loss mask of a token tensor, if any
  int64_t rows = 0; ///< rows over all ranks
  std::optional<Layout> layout; ///< unset: replicated on every rank
};

namespace {

struct ModelState {
  std::string name;
  ModelConfig cfg;
  bool trainable = false;
  AdamSettings adam;
  std::string checkpoint;
  Layout layout, initial;
  ParamMap params;
  std::unique_ptr<Adam> opt;
  Layout optLayout;
  bool changed = false;   ///< trained or moved by ema: saved in checkpoints
  ParamMap host;          ///< host copy of an offloaded model's shard
  bool offloaded = false; ///< params freed; `host` holds the weights
  at::Device workDevice = at::kCPU; ///< where the params go when loaded
  int64_t trainCalls = 0; ///< counted on every rank: moments exist once > 0
};

struct DatasetState {
  std::string name, path;
  int64_t batch = 0, promptLen = 0, responseLen = 0;
  std::vector<std::string> fields;
  std::unique_ptr<JsonlDataset> data;
};

/// One number of the progress line and metrics file. Every rank records
/// the same slots in the same order (the program is the same everywhere).
struct Metric {
  std::string key;
  double value = 0;
  bool valid = false;
  bool isTime =
      false; ///< max over ranks; others are averaged over ranks that have them
};

bool sameLayout(const Layout &a, const Layout &b) {
  return a.firstGpu == b.firstGpu && a.dp == b.dp && a.tp == b.tp &&
         a.pp == b.pp;
}

std::string layoutStr(const Layout &l) {
  return "gpus [" + std::to_string(l.firstGpu) + ", " +
         std::to_string(l.firstGpu + l.size()) +
         ") dp=" + std::to_string(l.dp) + " tp=" + std::to_string(l.tp) +
         " pp=" + std::to_string(l.pp);
}

/// The "key=value,..." settings of a call, as code generation writes them.
class Settings {
public:
  explicit Settings(const char *text) {
    std::stringstream ss(text ? text : "");
    std::string item;
    while (std::getline(ss, item, ','))
      if (auto eq = item.find('='); eq != std::string::npos)
        values[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
  }
  double get(const std::string &key, double fallback) const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  double need(const std::string &key) const {
    auto it = values.find(key);
    if (it == values.end())
      throw Error("setting '" + key + "' is missing");
    return it->second;
  }

private:
  std::map<std::string, double> values;
};

std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      out.push_back(item);
  return out;
}

/// Where a whole sequence [N, S] has real tokens to predict: [N, S-1],
/// aligned with per-token logprobs (the loss mask of text without a
/// generation mask).
at::Tensor predictedTokens(const at::Tensor &seq, int64_t pad) {
  return seq.narrow(1, 1, seq.size(1) - 1) != pad;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^
               (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

double peakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) * 1024.0; // Linux reports KiB
}

} // namespace

struct rlhf_prog {
  // Settings from the generated constants and the command line.
  std::string name;
  int64_t steps = 0, seed = 0, saveInterval = 0, gpus = 0;
  double predictedIteration = 0;
  std::vector<double> predictedMemory;
  std::string outDir, resumeFrom, tracePath;
  std::unique_ptr<MeasuredTrace> trace; ///< with --trace
  bool resume = false, quiet = false;
  std::map<std::string, std::string> dataOverride;

  std::unique_ptr<Communicator> world;
  int rank = -1;
  /// Where model state lives (RLHF_DEVICE); batch values stay on the host.
  c10::Device device = c10::kCPU;
  /// The weights' dtype (RLHF_PRECISION); master weights and Adam's moments
  /// are fp32 whatever it is.
  at::ScalarType weightDtype = at::kFloat;
  at::TensorOptions weightOpts() const {
    return at::TensorOptions().dtype(weightDtype).device(device);
  }
  at::TensorOptions fp32Opts() const {
    return at::TensorOptions().dtype(at::kFloat).device(device);
  }
  std::vector<ModelState> models;
  std::vector<DatasetState> datasets;
  std::string tokenizerPath; ///< a sentencepiece model, or "" for characters
  std::unique_ptr<TextTokenizer> tokenizer;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, ParallelGroups>
      groups;
  Layout replicated; ///< every rank, all rows

  std::deque<rlhf_value> values; ///< this step's values
  std::vector<Metric> metrics;
  size_t metricCursor = 0;
  Clock::time_point stepStart, runStart;
  int64_t firstStep = 0, stepIndex = 0;

  ParallelGroups &groupsOf(const Layout &l) {
    auto key = std::make_tuple(l.firstGpu, l.dp, l.tp, l.pp);
    auto it = groups.find(key);
    if (it == groups.end())
      it = groups.emplace(key, makeGroups(*world, l)).first;
    return it->second;
  }

  rlhf_value *newValue() { return &values.emplace_back(); }

  void record(const std::string &key, double v, bool valid,
              bool isTime = false) {
    if (metricCursor == metrics.size())
      metrics.push_back({key, 0, false, isTime});
    Metric &m = metrics[metricCursor++];
    m.key = key;
    m.value = v;
    m.valid = valid;
    m.isTime = isTime;
  }
};

namespace {

[[noreturn]] void die(const rlhf_prog *p, const std::string &msg) {
  std::fflush(stdout);
  std::fprintf(stderr, "rank %d: error: %s\n", p ? p->rank : -1, msg.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

/// Runs an entry point; a failure ends this rank (and so the job).
template <typename F> auto guarded(rlhf_prog *p, const char *what, F &&f) {
  try {
    return f();
  } catch (const c10::Error &e) { // without LibTorch's C++ backtrace
    die(p, std::string(what) + ": " + e.what_without_backtrace());
  } catch (const std::exception &e) {
    die(p, std::string(what) + ": " + e.what());
  }
}

Layout layoutFrom(const int64_t *l) { return {l[0], l[1], l[2], l[3]}; }

ModelState &modelAt(rlhf_prog *p, int64_t i) {
  if (i < 0 || i >= int64_t(p->models.size()))
    throw Error("model index " + std::to_string(i) + " out of range");
  return p->models[size_t(i)];
}

/// Row range of data-parallel rank `d` of `dp` over `rows`.
std::pair<int64_t, int64_t> rowSlice(int64_t d, int64_t dp, int64_t rows) {
  return {d * rows / dp, (d + 1) * rows / dp};
}

/// `v`'s tensor (and mask) moved to `to`: ranks of `to` end up holding their
/// data-parallel rows (all rows when `to` is the replicated layout).
rlhf_value *relayout(rlhf_prog *p, rlhf_value *v, const Layout &to) {
  if (v->isRecord)
    throw Error("cannot move a whole record; take a field first");
  if (v->layout && sameLayout(*v->layout, to))
    return v;
  rlhf_value *out = p->newValue();
  out->rows = v->rows;
  out->layout = to;
  ParallelGroups &g = p->groupsOf(to);
  if (!v->layout) {
    // Replicated: every rank cuts its own rows.
    if (g.member) {
      auto [a, b] = rowSlice(g.dpRank, to.dp, v->rows);
      out->t = v->t.narrow(0, a, b - a);
      if (v->mask.defined())
        out->mask = v->mask.narrow(0, a, b - a);
    }
    return out;
  }
  // Every rank learns the row shape from the producer's first head (all
  // ranks must agree on it to size the receive buffers).
  const Layout &from = *v->layout;
  auto move = [&](const at::Tensor &mine, bool hasIt) -> at::Tensor {
    // Shape of one row, broadcast from the producer's first data-parallel head.
    int64_t head = from.gpu(0, from.pp - 1, 0);
    at::Tensor meta = at::zeros({9}, at::kLong);
    if (p->rank == head) {
      meta[0] = hasIt ? 1 : 0;
      meta[1] = mine.dim();
      for (int64_t i = 1; i < mine.dim() && i < 8; ++i)
        meta[1 + i] = mine.size(i);
      meta[8] = int64_t(mine.scalar_type());
    }
    p->world->broadcast(meta, int(head));
    if (meta[0].item<int64_t>() == 0)
      return at::Tensor();
    std::vector<int64_t> shape{1};
    for (int64_t i = 1; i < meta[1].item<int64_t>(); ++i)
      shape.push_back(meta[1 + i].item<int64_t>());
    at::Tensor like = at::empty(shape, at::ScalarType(meta[8].item<int64_t>()));
    at::Tensor t = transferBatch(mine.defined() ? mine : like, v->rows, like,
                                 from, to, *p->world);
    // transferBatch fills stage 0 of each pipeline; later stages copy it.
    if (to.pp > 1 && g.member) {
      if (!t.defined()) {
        auto [a, b] = rowSlice(g.dpRank, to.dp, v->rows);
        shape[0] = b - a;
        t = at::empty(shape, like.options());
      }
      g.pp->broadcast(t, 0);
    }
    return t;
  };
  out->t = move(v->t, true);
  out->mask = move(v->mask, v->mask.defined());
  return out;
}

rlhf_value *tensorValue(rlhf_prog *p, at::Tensor t, at::Tensor mask,
                        int64_t rows, std::optional<Layout> layout) {
  rlhf_value *v = p->newValue();
  v->t = std::move(t);
  v->mask = std::move(mask);
  v->rows = rows;
  v->layout = layout;
  return v;
}

rlhf_value *recordValue(rlhf_prog *p,
                        std::map<std::string, rlhf_value *> fields) {
  rlhf_value *v = p->newValue();
  v->isRecord = true;
  v->fields = std::move(fields);
  return v;
}

/// This rank's tensor of `v` when the call runs on `l` (undefined off-mesh).
at::Tensor rowsOn(rlhf_prog *p, rlhf_value *v, const Layout &l,
                  at::Tensor *mask = nullptr) {
  rlhf_value *m = relayout(p, v, l);
  if (mask)
    *mask = m->mask;
  return m->t;
}

/// A tensor gathered on every rank (host functions run replicated).
rlhf_value *gathered(rlhf_prog *p, rlhf_value *v) {
  return relayout(p, v, p->replicated);
}

/// This rank's rows of a train call on `l`: its data-parallel share of
/// every minibatch, so that minibatch m holds the same global rows whatever
/// the layout (a contiguous split of the whole batch would not).
at::Tensor trainRows(rlhf_prog *p, rlhf_value *v, const Layout &l,
                     int64_t minibatches, at::Tensor *mask) {
  rlhf_value *full = gathered(p, v);
  ParallelGroups &g = p->groupsOf(l);
  if (!g.member)
    return at::Tensor();
  const int64_t N = full->rows;
  if (minibatches < 1 || N % minibatches)
    throw Error("batch of " + std::to_string(N) + " rows does not split into " +
                std::to_string(minibatches) + " minibatches");
  const int64_t per = N / minibatches;
  std::vector<int64_t> rows;
  for (int64_t m = 0; m < minibatches; ++m) {
    auto [a, b] = rowSlice(g.dpRank, l.dp, per);
    for (int64_t r = a; r < b; ++r)
      rows.push_back(m * per + r);
  }
  at::Tensor idx = at::tensor(rows, at::kLong);
  if (mask)
    *mask =
        full->mask.defined() ? full->mask.index_select(0, idx) : at::Tensor();
  return full->t.index_select(0, idx);
}

LlamaModel makeModel(rlhf_prog *p, ModelState &m, const Layout &l) {
  if (m.offloaded)
    throw Error("model '" + m.name +
                "' rests in host memory; the plan is missing an rlhf.onload "
                "before this call");
  if (!sameLayout(m.layout, l))
    throw Error("model '" + m.name + "' is laid out as " + layoutStr(m.layout) +
                " but the call runs as " + layoutStr(l) +
                "; the plan is missing a reallocation");
  ParallelGroups &g = p->groupsOf(l);
  return LlamaModel(m.cfg, m.params, {g.tp.get(), g.tpRank, int(l.tp)},
                    {g.pp.get(), g.stage, int(l.pp)});
}

/// Where a timed op is drawn in the measured trace: on the ranks of
/// `layouts` (every rank when empty), as category `cat`. Ranks outside them
/// pass through the op without work of their own.
struct TraceOn {
  const char *cat;
  std::vector<Layout> layouts;
};

/// Times a call and records it under `label` (max over ranks), and with
/// --trace as a span of this rank.
template <typename F>
auto timed(rlhf_prog *p, const std::string &label, const TraceOn &on, F &&f) {
  auto t0 = Clock::now();
  auto r = f();
  auto t1 = Clock::now();
  p->record("time/" + label, std::chrono::duration<double>(t1 - t0).count(),
            true, true);
  if (p->trace &&
      (on.layouts.empty() ||
       std::any_of(on.layouts.begin(), on.layouts.end(),
                   [&](const Layout &l) { return l.contains(p->rank); })))
    p->trace->add(label, on.cat, t0, t1, p->stepIndex);
  return r;
}

/// Mean over masked tokens of logprobs - ref logprobs (an estimate of the KL).
double meanKl(const at::Tensor &lp, const at::Tensor &ref,
              const at::Tensor &mask) {
  at::Tensor m = mask.to(at::kFloat);
  double n = m.sum().item<double>();
  return n > 0 ? ((lp - ref) * m).sum().item<double>() / n : 0.0;
}

/// Reallocates `m`'s Adam moments (and master weights) to `to` (collective;
/// a no-op when there).
void moveMoments(rlhf_prog *p, ModelState &m, const Layout &to) {
  if (!m.opt || sameLayout(m.optLayout, to) || m.trainCalls == 0) {
    m.optLayout = to;
    return;
  }
  m.opt->unshard();
  std::vector<ParamMap *> states{&m.opt->moments1(), &m.opt->moments2()};
  // Every rank knows the precision, so all take part in the same calls.
  if (p->weightDtype != at::kFloat)
    states.push_back(&m.opt->masterWeights());
  for (ParamMap *s : states)
    *s = reallocate(m.cfg, std::move(*s), m.optLayout, to, *p->world, nullptr,
                    p->fp32Opts());
  m.optLayout = to;
}

void saveAll(rlhf_prog *p, int64_t step) {
  fs::path dir =
      fs::path(p->outDir) / "checkpoints" / ("step-" + std::to_string(step));
  for (ModelState &m : p->models) {
    if (!m.changed)
      continue;
    // Optimizer moments live in the train layout, sliced over dp under
    // ZeRO; bring them whole to the parameters' layout so the checkpoint
    // is consistent.
    if (m.opt)
      m.opt->unshard();
    moveMoments(p, m, m.layout);
    fs::create_directories(dir / m.name);
    saveCheckpoint((dir / m.name).string(), m.cfg, m.params, m.opt.get(),
                   m.layout, *p->world, step);
  }
  p->world->barrier();
  if (p->rank == 0) {
    // The marker moves only after every model is on disk.
    fs::path tmp = fs::path(p->outDir) / "checkpoints" / "latest.tmp";
    std::ofstream(tmp) << step << "\n";
    fs::rename(tmp, fs::path(p->outDir) / "checkpoints" / "latest");
  }
  p->world->barrier();
}

int64_t latestCheckpoint(const rlhf_prog *p) {
  std::ifstream in(fs::path(p->outDir) / "checkpoints" / "latest");
  int64_t step = -1;
  if (!(in >> step))
    return -1;
  return step;
}

void usage(const char *argv0, const rlhf_prog *p) {
  std::printf(
      "%s: a compiled rlhf program (%s)\n\n"
      "usage: rlhf-run -n %lld %s [options]\n"
      "   or: MASTER_ADDR=.. MASTER_PORT=.. RANK=.. WORLD_SIZE=%lld %s "
      "[options]\n\n"
      "options:\n"
      "  --steps N        train for N steps (default %lld, from the program)\n"
      "  --out DIR        metrics.jsonl and checkpoints go here (default "
      "%s-run)\n"
      "  --resume         continue from the last checkpoint in --out\n"
      "  --data NAME=PATH read dataset NAME from PATH instead\n"
      "  --quiet          no per-step progress lines\n"
      "  --trace FILE     write what each rank ran (calls, reallocations,\n"
      "                   transfers, host functions) as a Chrome trace,\n"
      "                   extended as each step ends; open it in Perfetto\n"
      "                   beside the plan's `rlhfc --emit=trace`\n"
      "  --help           this text\n",
      argv0, p->name.c_str(), (long long)p->gpus, argv0, (long long)p->gpus,
      argv0, (long long)p->steps, p->name.c_str());
}

} // namespace

extern "C" {

rlhf_prog *rlhf_prog_create(int argc, char **argv, const char *name,
                            int64_t steps, int64_t seed, int64_t saveInterval,
                            int64_t gpus, double predictedIteration) {
  auto *p = new rlhf_prog;
  p->name = name;
  p->steps = steps;
  p->seed = seed;
  p->saveInterval = saveInterval;
  p->gpus = gpus;
  p->predictedIteration = predictedIteration;
  p->outDir = std::string(name) + "-run";
  if (const char *r = std::getenv("RANK"))
    p->rank = std::atoi(r);
  static const option opts[] = {{"steps", required_argument, nullptr, 's'},
                                {"out", required_argument, nullptr, 'o'},
                                {"resume", no_argument, nullptr, 'r'},
                                {"data", required_argument, nullptr, 'd'},
                                {"quiet", no_argument, nullptr, 'q'},
                                {"trace", required_argument, nullptr, 't'},
                                {"help", no_argument, nullptr, 'h'},
                                {nullptr, 0, nullptr, 0}};
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
    switch (c) {
    case 's': {
      char *end = nullptr;
      long long n = std::strtoll(optarg, &end, 10);
      if (!end || *end || n < 0)
        die(p, std::string("--steps needs a non-negative integer, got '") +
                   optarg + "'");
      p->steps = n;
      break;
    }
    case 'o':
      p->outDir = optarg;
      break;
    case 'r':
      p->resume = true;
      break;
    case 'd': {
      std::string kv = optarg;
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        die(p, "--data needs NAME=PATH, got '" + kv + "'");
      p->dataOverride[kv.substr(0, eq)] = kv.substr(eq + 1);
      break;
    }
    case 'q':
      p->quiet = true;
      break;
    case 't':
      p->tracePath = optarg;
      break;
    case 'h':
      usage(argv[0], p);
      std::exit(0);
    default:
      die(p,
          std::string("unknown option '") + argv[optind - 1] + "'; see --help");
    }
  }
  if (optind < argc)
    die(p,
        std::string("unexpected argument '") + argv[optind] + "'; see --help");
  return p;
}

void rlhf_prog_add_model(rlhf_prog *p, const char *name, const int64_t *a,
                         int64_t trainable, double lr, double beta1,
                         double beta2, double eps, double weightDecay,
                         double gradClip, const char *checkpoint,
                         const int64_t *layout) {
  ModelState m;
  m.name = name;
  m.cfg.shape =
      ModelShape{a[0], a[1], a[2], a[3], a[4], a[5], a[8] != 0, a[7] != 0};
  m.cfg.maxSeq = a[6];
  m.trainable = trainable != 0;
  m.adam = AdamSettings{lr, beta1, beta2, eps, weightDecay, gradClip};
  m.checkpoint = checkpoint ? checkpoint : "";
  m.initial = m.layout = layoutFrom(layout);
  p->models.push_back(std::move(m));
}

void rlhf_prog_set_tokenizer(rlhf_prog *p, const char *path) {
  p->tokenizerPath = path ? path : "";
}

void rlhf_prog_add_dataset(rlhf_prog *p, const char *name, const char *path,
                           int64_t batch, int64_t promptLen,
                           int64_t responseLen, const char *fields) {
  DatasetState d;
  d.name = name;
  d.path = path;
  d.batch = batch;
  d.promptLen = promptLen;
  d.responseLen = responseLen;
  d.fields = splitList(fields);
  p->datasets.push_back(std::move(d));
}

void rlhf_prog_set_predicted_memory(rlhf_prog *p, int64_t gpu, double bytes) {
  if (gpu >= 0 && gpu < 1 << 20) {
    if (size_t(gpu) >= p->predictedMemory.size())
      p->predictedMemory.resize(size_t(gpu) + 1, 0.0);
    p->predictedMemory[size_t(gpu)] = bytes;
  }
}

int64_t rlhf_prog_start(rlhf_prog *p) {
  return guarded(p, "start", [&]() -> int64_t {
    RendezvousConfig cfg = RendezvousConfig::fromEnv();
    p->rank = cfg.rank;
    if (cfg.worldSize != p->gpus)
      throw Error("this program was planned for " + std::to_string(p->gpus) +
                  " GPUs but the job has " + std::to_string(cfg.worldSize) +
                  " workers; run it with rlhf-run -n " +
                  std::to_string(p->gpus));
    p->device = selectDevice(cfg);
    p->weightDtype = selectPrecision(cfg, p->device);
    p->world = createWorldCommunicator(cfg, p->device);
    p->replicated = Layout{0, 1, p->gpus, 1};
    p->runStart = Clock::now();

    // Datasets, and one character vocabulary over all of them.
    std::vector<const JsonlDataset *> all;
    for (DatasetState &d : p->datasets) {
      if (auto it = p->dataOverride.find(d.name); it != p->dataOverride.end())
        d.path = it->second;
      d.data = std::make_unique<JsonlDataset>(d.path, d.fields);
      all.push_back(d.data.get());
    }
    if (p->tokenizerPath.empty())
      p->tokenizer = std::make_unique<CharTokenizer>(all);
    else
      p->tokenizer = std::make_unique<Tokenizer>(p->tokenizerPath);
    for (ModelState &m : p->models)
      if (p->tokenizer->vocabSize() > m.cfg.shape.vocab)
        throw Error((p->tokenizerPath.empty()
                         ? "the datasets use " +
                               std::to_string(p->tokenizer->vocabSize()) +
                               " token ids (characters plus pad/bos/eos)"
                         : "tokenizer '" + p->tokenizerPath + "' has " +
                               std::to_string(p->tokenizer->vocabSize()) +
                               " pieces") +
                    " but model '" + m.name + "' has a vocabulary of " +
                    std::to_string(m.cfg.shape.vocab) +
                    "; use a model with a larger vocab");

    int64_t resumed = -1;
    if (p->resume) {
      resumed = latestCheckpoint(p);
      if (resumed < 0)
        throw Error("--resume: no checkpoint in '" +
                    (fs::path(p->outDir) / "checkpoints").string() +
                    "'; run without --resume first, or point --out at the run");
    }
    for (ModelState &m : p->models) {
      fs::path ckpt = fs::path(p->outDir) / "checkpoints" /
                      ("step-" + std::to_string(resumed)) / m.name;
      if (resumed >= 0 && fs::exists(ckpt / "state.json")) {
        CheckpointState s =
            loadCheckpoint(ckpt.string(), m.cfg, m.layout, *p->world);
        // The checkpoint holds fp32 weights (the master weights when
        // there were any); low-precision runs compute with a cast.
        ParamMap weights = toDevice(std::move(s.params), p->device);
        m.params = toDevice(weights, p->device, p->weightDtype);
        m.changed = true;
        if (m.trainable) {
          m.opt = std::make_unique<Adam>(m.adam);
          m.opt->restore(toDevice(std::move(s.adamM), p->device),
                         toDevice(std::move(s.adamV), p->device), s.adamSteps,
                         p->weightDtype != at::kFloat ? std::move(weights) : ParamMap{});
          m.trainCalls = 1;
        }
      } else {
        // Same seed for every model: models of one architecture start equal,
        // as a policy and its reference do.
        m.params = toDevice(initialShard(m.cfg, m.layout, *p->world,
                                         uint64_t(p->seed), m.checkpoint),
                            p->device, p->weightDtype);
      }
      m.workDevice = p->device;
      if (m.trainable && !m.opt)
        m.opt = std::make_unique<Adam>(m.adam);
      m.optLayout = m.layout;
      p->groupsOf(m.layout);
    }
    p->firstStep = resumed >= 0 ? resumed + 1 : 0;

    if (p->rank == 0) {
      fs::create_directories(fs::path(p->outDir) / "checkpoints");
      // A resumed run keeps the metrics up to its checkpoint and drops the
      // rest, so no step appears twice.
      fs::path metrics = fs::path(p->outDir) / "metrics.jsonl";
      std::vector<std::string> keep;
      if (resumed >= 0) {
        std::ifstream in(metrics);
        for (std::string line; std::getline(in, line);) {
          auto j = nlohmann::json::parse(line, nullptr, false);
          if (!j.is_discarded() && j.value("step", int64_t(-1)) <= resumed)
            keep.push_back(line);
        }
      }
      std::ofstream out(metrics, std::ios::trunc);
      for (const std::string &l : keep)
        out << l << "\n";
      std::printf(
          "%s: %lld workers on %s (%s), steps %lld..%lld, output in %s%s\n",
          p->name.c_str(), (long long)p->gpus,
          p->device.is_cuda() ? "CUDA" : "the CPU", p->world->backendName(),
          (long long)p->firstStep + 1,
          (long long)p->steps, p->outDir.c_str(),
          resumed >= 0
              ? (" (resumed after step " + std::to_string(resumed + 1) + ")")
                    .c_str()
              : "");
      std::fflush(stdout);
    }
    p->world->barrier();
    if (!p->tracePath.empty())
      p->trace = std::make_unique<MeasuredTrace>(
          p->tracePath, *p->world, p->name, p->predictedIteration);
    return p->firstStep;
  });
}

int64_t rlhf_prog_steps(const rlhf_prog *p) { return p->steps; }

void rlhf_step_begin(rlhf_prog *p, int64_t step) {
  p->stepIndex = step;
  p->stepStart = Clock::now();
  p->metricCursor = 0;
}

void rlhf_step_end(rlhf_prog *p, int64_t step) {
  guarded(p, "step end", [&] {
    double stepTime =
        std::chrono::duration<double>(Clock::now() - p->stepStart).count();
    p->record("time/step", stepTime, true, true);
    p->metrics.resize(p->metricCursor);
    // Combine every rank's slots: times take the slowest rank, the rest the
    // mean of the ranks that have them.
    const int64_t K = int64_t(p->metrics.size());
    at::Tensor mine = at::zeros({2 * K}, at::kDouble);
    for (int64_t i = 0; i < K; ++i) {
      mine[2 * i] = p->metrics[size_t(i)].value;
      mine[2 * i + 1] = p->metrics[size_t(i)].valid ? 1.0 : 0.0;
    }
    at::Tensor all = p->world->allGather(mine.unsqueeze(0));
    nlohmann::ordered_json row;
    row["step"] = step;
    std::string line;
    for (int64_t i = 0; i < K; ++i) {
      const Metric &m = p->metrics[size_t(i)];
      at::Tensor vals = all.select(1, 2 * i), valid = all.select(1, 2 * i + 1);
      double n = valid.sum().item<double>();
      if (n == 0)
        continue;
      double v = m.isTime ? (vals * valid).max().item<double>()
                          : (vals * valid).sum().item<double>() / n;
      row[m.key] = v;
    }
    if (p->rank == 0) {
      std::ofstream(fs::path(p->outDir) / "metrics.jsonl", std::ios::app)
          << row.dump() << "\n";
      if (!p->quiet) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "step %4lld/%lld", (long long)step + 1,
                      (long long)p->steps);
        line = buf;
        std::string times;
        for (auto &[k, v] : row.items()) {
          if (k == "step" || k == "time/step")
            continue;
          std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
          if (k.rfind("time/", 0) == 0)
            times += " " + k.substr(5) + " " + buf + "s";
          else
            line += "  " + k + " " + buf;
        }
        std::snprintf(buf, sizeof buf, "  | %.3f s/step |", stepTime);
        line += buf + times;
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
    }
    if (p->trace)
      p->trace->flush(*p->world);
    if (p->saveInterval > 0 &&
        ((step + 1) % p->saveInterval == 0 || step + 1 == p->steps))
      saveAll(p, step);
    p->values.clear();
    return 0;
  });
}

int rlhf_prog_finish(rlhf_prog *p) {
  return guarded(p, "finish", [&] {
    at::Tensor peaks = at::tensor({peakRssBytes(), devicePeakBytes(p->device)},
                                  at::kDouble)
                           .view({1, 2});
    at::Tensor all = p->world->allGather(peaks);
    if (p->rank == 0) {
      double wall =
          std::chrono::duration<double>(Clock::now() - p->runStart).count();
      std::printf(
          "done: %lld steps in %.1f s (plan predicted %.3g s/step on the "
          "planned hardware)\n",
          (long long)(p->steps - p->firstStep), wall, p->predictedIteration);
      const bool gpu = p->device.is_cuda();
      std::printf("memory per worker: planned peak (model state and "
                  "activations on its GPU) vs measured peak %s\n",
                  gpu ? "of the CUDA caching allocator (and RSS)"
                      : "RSS (the whole process)");
      for (int64_t r = 0; r < p->gpus; ++r) {
        double pred = r < int64_t(p->predictedMemory.size())
                          ? p->predictedMemory[size_t(r)]
                          : 0;
        double rss = all[r][0].item<double>(), dev = all[r][1].item<double>();
        if (gpu)
          std::printf("  rank %lld: predicted %.2f MiB, measured GPU peak %.1f "
                      "MiB (%.0f%% of predicted), peak RSS %.1f MiB\n",
                      (long long)r, pred / (1 << 20), dev / (1 << 20),
                      pred > 0 ? 100.0 * dev / pred : 0.0, rss / (1 << 20));
        else
          std::printf(
              "  rank %lld: predicted %.2f MiB, measured peak RSS %.1f MiB\n",
              (long long)r, pred / (1 << 20), rss / (1 << 20));
      }
      std::fflush(stdout);
    }
    p->world->barrier();
    p->world.reset();
    delete p;
    return 0;
  });
}

rlhf_value *rlhf_load(rlhf_prog *p, int64_t di, int64_t step) {
  return guarded(p, "load", [&] {
    if (di < 0 || di >= int64_t(p->datasets.size()))
      throw Error("dataset index out of range");
    DatasetState &d = p->datasets[size_t(di)];
    std::vector<Example> rows = d.data->batch(step, d.batch, uint64_t(p->seed));
    const int64_t B = d.batch, pad = p->tokenizer->pad();
    std::map<std::string, rlhf_value *> fields;
    for (const std::string &f : d.fields) {
      bool answer = f == "answer", prompt = f == "prompt";
      int64_t width = prompt   ? d.promptLen
                      : answer ? std::max<int64_t>(d.responseLen, 1)
                               : d.promptLen + d.responseLen;
      at::Tensor t = at::full({B, width}, pad, at::kLong);
      for (int64_t b = 0; b < B; ++b) {
        std::vector<int64_t> ids =
            p->tokenizer->encode(rows[size_t(b)].at(f), !answer);
        if (!answer && f != "prompt")
          ids.push_back(p->tokenizer->eos());
        // Prompts keep their end (left-padded); others their start.
        if (int64_t(ids.size()) > width)
          ids = prompt ? std::vector<int64_t>(ids.end() - width, ids.end())
                       : std::vector<int64_t>(ids.begin(), ids.begin() + width);
        int64_t off = prompt ? width - int64_t(ids.size()) : 0;
        for (size_t i = 0; i < ids.size(); ++i)
          t[b][off + int64_t(i)] = ids[i];
      }
      at::Tensor mask;
      if (!prompt && !answer) // whole sequences: train on every real token
        mask = predictedTokens(t, pad);
      fields[f] = tensorValue(p, t, mask, B, std::nullopt);
    }
    return recordValue(p, std::move(fields));
  });
}

rlhf_value *rlhf_field(rlhf_prog *p, rlhf_value *r, const char *name) {
  return guarded(p, "field", [&] {
    if (!r->isRecord)
      throw Error(std::string("field '") + name +
                  "' of a value that is not a record");
    auto it = r->fields.find(name);
    if (it == r->fields.end())
      throw Error(std::string("record has no field '") + name + "'");
    return it->second;
  });
}

void rlhf_realloc(rlhf_prog *p, int64_t mi, const int64_t *from,
                  const int64_t *to) {
  guarded(p, "realloc", [&] {
    ModelState &m = modelAt(p, mi);
    Layout f = layoutFrom(from), t = layoutFrom(to);
    if (m.offloaded)
      throw Error("the plan reallocates '" + m.name +
                  "', which rests in host memory; offloaded models keep "
                  "their call's layout");
    if (!sameLayout(m.layout, f))
      throw Error("the plan reallocates '" + m.name + "' from " + layoutStr(f) +
                  " but it is laid out as " + layoutStr(m.layout));
    timed(p, "realloc " + m.name, {"realloc", {f, t}}, [&] {
      m.params = reallocate(m.cfg, std::move(m.params), f, t, *p->world,
                            nullptr, p->weightOpts());
      return 0;
    });
    m.layout = t;
    p->groupsOf(t);
    return 0;
  });
}

/// Checks that `m` may rest in host memory in layout `l`.
void checkOffloadable(const ModelState &m, const Layout &l, const char *what) {
  if (m.trainable)
    throw Error(
        std::string("the plan ") + what + " '" + m.name +
        "', which is trainable; only frozen models rest in host memory");
  if (!sameLayout(m.layout, l))
    throw Error(std::string("the plan ") + what + " '" + m.name + "' as " +
                layoutStr(l) + " but it is laid out as " + layoutStr(m.layout));
}

void rlhf_offload(rlhf_prog *p, int64_t mi, const int64_t *lay) {
  guarded(p, "offload", [&] {
    ModelState &m = modelAt(p, mi);
    checkOffloadable(m, layoutFrom(lay), "offloads");
    if (m.offloaded)
      return 0;
    // Frozen weights never change, so the host copy is made once.
    if (m.host.empty())
      for (auto &[n, t] : m.params) {
        m.workDevice = t.device();
        auto opts = t.options().device(at::kCPU).pinned_memory(t.is_cuda());
        m.host[n] = at::empty(t.sizes(), opts).copy_(t);
      }
    for (auto &[n, t] : m.params)
      t = at::Tensor(); // frees the working copy
    m.offloaded = true;
    return 0;
  });
}

void rlhf_onload(rlhf_prog *p, int64_t mi, const int64_t *lay) {
  guarded(p, "onload", [&] {
    ModelState &m = modelAt(p, mi);
    checkOffloadable(m, layoutFrom(lay), "loads");
    if (!m.offloaded)
      return 0;
    timed(p, "onload " + m.name, {"load", {layoutFrom(lay)}}, [&] {
      for (auto &[n, t] : m.params)
        t = m.host.at(n).to(m.workDevice, /*non_blocking=*/false,
                            /*copy=*/true);
      return 0;
    });
    m.offloaded = false;
    return 0;
  });
}

rlhf_value *rlhf_transfer(rlhf_prog *p, rlhf_value *v, const int64_t *to) {
  return guarded(p, "transfer", [&] {
    Layout l = layoutFrom(to);
    TraceOn on{"transfer", {l}};
    if (v->layout)
      on.layouts.push_back(*v->layout);
    return timed(p, "transfer", on, [&] { return relayout(p, v, l); });
  });
}

rlhf_value *rlhf_generate(rlhf_prog *p, int64_t mi, rlhf_value *prompt,
                          const int64_t *lay, int64_t maxNew, int64_t n,
                          double temperature, double topP, int64_t greedy,
                          const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    Layout l = layoutFrom(lay);
    return timed(p, label, {"call", {l}}, [&] {
      // n samples per prompt, adjacent, so row r samples prompt r / n.
      rlhf_value *full = gathered(p, prompt);
      const int64_t B = full->rows, N = B * n, pad = p->tokenizer->pad();
      ParallelGroups &g = p->groupsOf(l);
      at::Tensor seq, lp, mask, prompts;
      if (g.member) {
        auto [a, b] = rowSlice(g.dpRank, l.dp, N);
        std::vector<std::vector<int64_t>> rows;
        std::vector<uint64_t> seeds;
        for (int64_t r = a; r < b; ++r) {
          at::Tensor pr = full->t[r / n];
          std::vector<int64_t> ids;
          for (int64_t i = 0; i < pr.size(0); ++i)
            if (int64_t id = pr[i].item<int64_t>(); id != pad)
              ids.push_back(id);
          rows.push_back(std::move(ids));
          // Per-row streams: samples do not depend on the layout.
          seeds.push_back(
              mix(mix(uint64_t(p->seed), uint64_t(p->stepIndex)), uint64_t(r)));
        }
        GenerateOptions o;
        o.maxNewTokens = maxNew;
        o.greedy = greedy != 0;
        o.temperature = temperature;
        o.topP = topP;
        o.eosToken = p->tokenizer->eos();
        o.padToken = pad;
        o.rowSeeds = std::move(seeds);
        LlamaModel model = makeModel(p, m, l);
        Generation gen = model.generate(rows, o);
        gen.seq = gen.seq.cpu();
        gen.logprobs = gen.logprobs.cpu();
        gen.mask = gen.mask.cpu();
        // Pad the prompt part to the dataset's width so every rank agrees.
        const int64_t P = full->t.size(1);
        if (gen.promptLen < P) {
          int64_t extra = P - gen.promptLen;
          gen.seq =
              at::cat({at::full({b - a, extra}, pad, at::kLong), gen.seq}, 1);
          gen.mask = at::cat(
              {at::zeros({b - a, extra}, gen.mask.options()), gen.mask}, 1);
          gen.promptLen = P;
        }
        const int64_t T = gen.seq.size(1), G = T - P;
        seq = gen.seq;
        lp = at::zeros({b - a, T - 1}, at::kFloat);
        lp.narrow(1, P - 1, G).copy_(gen.logprobs.narrow(1, 0, G));
        mask = at::zeros({b - a, T - 1}, at::kBool);
        mask.narrow(1, P - 1, G).copy_(gen.mask.narrow(1, P, G).to(at::kBool));
        prompts = full->t.repeat_interleave(n, 0).narrow(0, a, b - a);
      }
      std::map<std::string, rlhf_value *> f;
      f["prompt"] = tensorValue(p, prompts, at::Tensor(), N, l);
      f["seq"] = tensorValue(p, seq, mask, N, l);
      f["logprobs"] = tensorValue(p, lp, mask, N, l);
      f["mask"] = tensorValue(p, mask, mask, N, l);
      return recordValue(p, std::move(f));
    });
  });
}

rlhf_value *rlhf_inference(rlhf_prog *p, int64_t mi, rlhf_value *seqV,
                           const int64_t *lay, const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    Layout l = layoutFrom(lay);
    return timed(p, label, {"call", {l}}, [&] {
      at::Tensor mask;
      at::Tensor seq = rowsOn(p, seqV, l, &mask);
      ParallelGroups &g = p->groupsOf(l);
      const bool value = m.cfg.shape.valueHead;
      at::Tensor out, score;
      if (g.member) {
        at::NoGradGuard noGrad;
        LlamaModel model = makeModel(p, m, l);
        at::Tensor y = model.forward(seq);
        if (l.pp > 1) { // the last stage has the result; the others take it
          std::vector<int64_t> shape{seq.size(0), seq.size(1)};
          if (!value)
            shape.push_back(m.cfg.shape.vocab);
          if (!model.lastStage())
            y = at::empty(shape, p->fp32Opts()); // logits and values are fp32
          g.pp->broadcast(y, int(l.pp - 1));
        }
        y = y.cpu();
        if (!mask.defined())
          mask = predictedTokens(seq, p->tokenizer->pad());
        if (value) {
          out = y.narrow(1, 0, y.size(1) - 1).contiguous();
          // A sequence's score is the value at its last real token.
          at::Tensor real = (seq != p->tokenizer->pad()).to(at::kLong);
          at::Tensor pos =
              at::arange(seq.size(1), at::kLong).unsqueeze(0).expand_as(real);
          at::Tensor last = (pos * real).argmax(1, true);
          score = y.gather(1, last).squeeze(1);
        } else {
          out = tokenLogprobs(y, seq);
        }
      }
      std::map<std::string, rlhf_value *> f;
      f["seq"] = tensorValue(p, seq, mask, seqV->rows, l);
      f[value ? "values" : "logprobs"] =
          tensorValue(p, out, mask, seqV->rows, l);
      if (value)
        f["score"] = tensorValue(p, score, at::Tensor(), seqV->rows, l);
      return recordValue(p, std::move(f));
    });
  });
}

rlhf_value *rlhf_train(rlhf_prog *p, int64_t mi, int64_t loss, int64_t nin,
                       rlhf_value *const *ins, const int64_t *lay,
                       int64_t minibatches, int64_t epochs,
                       const char *settings, const char *label) {
  return guarded(p, label, [&] {
    ModelState &m = modelAt(p, mi);
    if (!m.trainable)
      throw Error("model '" + m.name + "' is not trainable");
    Layout l = layoutFrom(lay);
    Settings s(settings);
    TrainOptions o;
    o.minibatches = minibatches;
    o.settings.clip = s.get("clip", o.settings.clip);
    o.settings.kl = s.get("kl", o.settings.kl);
    o.settings.beta = s.get("beta", o.settings.beta);
    o.recompute = s.get("recompute", 0.0) != 0.0;
    o.zero = s.get("zero", 0.0) != 0.0;
    static const std::pair<LossKind, int64_t> kinds[] = {
        {LossKind::PpoActor, 3}, {LossKind::PpoValue, 3}, {LossKind::Grpo, 4},
        {LossKind::Dpo, 4},      {LossKind::Sft, 1},      {LossKind::Rm, 2}};
    if (loss < 0 || loss > 5 || kinds[loss].second != nin)
      throw Error("train: loss " + std::to_string(loss) + " with " +
                  std::to_string(nin) +
                  " inputs does not match the runtime's losses");
    o.loss = kinds[loss].first;
    double kl = 0;
    bool hasKl = false;
    // Adam moments follow the parameters when the train layout changed
    // (collective, so every rank takes part).
    moveMoments(p, m, l);
    double lossValue = timed(p, label, {"call", {l}}, [&] {
      std::vector<at::Tensor> x(static_cast<size_t>(nin)),
          masks(static_cast<size_t>(nin));
      for (int64_t i = 0; i < nin; ++i)
        x[size_t(i)] = trainRows(p, ins[i], l, minibatches, &masks[size_t(i)]);
      ParallelGroups &g = p->groupsOf(l);
      if (!g.member)
        return 0.0;
      TrainBatch b;
      b.seq = x[0];
      // Whole sequences without a generation mask train on every real token.
      auto lossMask = [&](size_t i) {
        return (masks[i].defined() ? masks[i]
                                   : predictedTokens(x[i], p->tokenizer->pad()))
            .to(at::kFloat);
      };
      b.lossMask = lossMask(0);
      switch (o.loss) {
      case LossKind::PpoActor:
        b.oldLogprobs = x[1];
        b.advantages = x[2];
        break;
      case LossKind::PpoValue:
        b.oldValues = x[1];
        b.returns = x[2];
        break;
      case LossKind::Grpo:
        b.oldLogprobs = x[1];
        b.advantages = x[2];
        b.refLogprobs = x[3];
        kl = meanKl(x[1], x[3], b.lossMask);
        hasKl = true;
        break;
      case LossKind::Dpo:
        b.rejected = x[1];
        b.refLogprobs = x[2];
        b.refRejected = x[3];
        b.rejectedMask = lossMask(1);
        break;
      case LossKind::Rm:
        b.rejected = x[1];
        b.rejectedMask = lossMask(1);
        break;
      case LossKind::Sft:
        break;
      }
      o.microBatches = std::max<int64_t>(1, lay[4]);
      o.dp = g.dp.get();
      for (auto &[n, t] : m.params)
        t = t.detach().requires_grad_(true);
      LlamaModel model = makeModel(p, m, l);
      double total = 0;
      for (int64_t e = 0; e < epochs; ++e)
        total += trainStep(model, *m.opt, b, o).loss;
      m.params = model.params();
      for (auto &[n, t] : m.params)
        t = t.detach();
      return total / double(std::max<int64_t>(1, epochs));
    });
    m.changed = true;
    ++m.trainCalls;
    bool member = p->groupsOf(l).member;
    p->record("loss/" + m.name, lossValue, member);
    if (o.loss == LossKind::Grpo)
      p->record("kl", kl, member && hasKl);
    at::Tensor lt = at::full({}, lossValue, at::kFloat);
    return recordValue(
        p, {{"loss", tensorValue(p, lt, at::Tensor(), 1, std::nullopt)}});
  });
}

rlhf_value *rlhf_compute(rlhf_prog *p, int64_t kind, int64_t nin,
                         rlhf_value *const *ins, const char *settings,
                         const char *label) {
  return guarded(p, label, [&] {
    Settings s(settings);
    return timed(p, label, {"host", {}}, [&] {
      std::vector<rlhf_value *> x;
      for (int64_t i = 0; i < nin; ++i)
        x.push_back(gathered(p, ins[i]));
      auto need = [&](int64_t n) {
        if (nin != n)
          throw Error(std::string(label) + " takes " + std::to_string(n) +
                      " inputs, got " + std::to_string(nin));
      };
      auto one = [&](const char *name, at::Tensor t, at::Tensor mask,
                     int64_t rows) {
        return recordValue(
            p, {{name, tensorValue(p, t, mask, rows, std::nullopt)}});
      };
      switch (kind) {
      case RLHF_COMPUTE_EXACT_MATCH: {
        need(2);
        at::Tensor seq = x[0]->t, mask = x[0]->mask;
        if (!mask.defined())
          throw Error(
              "exact_match needs generated sequences (a generate's seq)");
        at::Tensor score =
            exactMatch(seq.narrow(1, 1, seq.size(1) - 1), mask.to(at::kLong),
                       x[1]->t, p->tokenizer->pad());
        p->record("reward", score.mean().item<double>(), true);
        return one("score", score, at::Tensor(), x[0]->rows);
      }
      case RLHF_COMPUTE_GRPO_ADV:
        need(1);
        return one("advantages",
                   grpoAdvantages(x[0]->t, int64_t(s.need("group"))),
                   at::Tensor(), x[0]->rows);
      case RLHF_COMPUTE_RLOO_ADV:
        need(1);
        return one("advantages",
                   rlooAdvantages(x[0]->t, int64_t(s.need("group"))),
                   at::Tensor(), x[0]->rows);
      case RLHF_COMPUTE_REMAX_ADV:
        need(2);
        return one("advantages", remaxAdvantages(x[0]->t, x[1]->t),
                   at::Tensor(), x[0]->rows);
      case RLHF_COMPUTE_KL_PENALTY: {
        need(3);
        at::Tensor mask = x[1]->mask.defined() ? x[1]->mask : x[2]->mask;
        p->record("kl", meanKl(x[1]->t, x[2]->t, mask), true);
        return one(
            "score",
            klPenalty(x[0]->t, x[1]->t, x[2]->t, mask, s.get("coef", 0.1)),
            at::Tensor(), x[0]->rows);
      }
      case RLHF_COMPUTE_GAE: {
        need(4);
        at::Tensor mask = x[2]->mask.defined() ? x[2]->mask : x[1]->mask;
        if (!mask.defined())
          throw Error(
              "gae needs the generated tokens' mask (logprobs of a generate)");
        p->record("kl", meanKl(x[2]->t, x[3]->t, mask), true);
        GaeResult r =
            gae(x[0]->t, x[1]->t, x[2]->t, x[3]->t, mask.to(at::kFloat),
                s.get("gamma", 1.0), s.get("lam", 0.95), s.get("kl", 0.0));
        return recordValue(
            p, {{"advantages",
                 tensorValue(p, r.advantages, mask, x[0]->rows, std::nullopt)},
                {"returns",
                 tensorValue(p, r.returns, mask, x[0]->rows, std::nullopt)}});
      }
      default:
        throw Error("unknown host function " + std::to_string(kind));
      }
    });
  });
}

void rlhf_ema(rlhf_prog *p, int64_t ti, int64_t si, double decay) {
  guarded(p, "ema", [&] {
    ModelState &t = modelAt(p, ti), &s = modelAt(p, si);
    ParamMap src = s.params;
    for (auto &[n, x] : src)
      x = x.detach().clone();
    src = reallocate(s.cfg, std::move(src), s.layout, t.layout, *p->world,
                     nullptr, p->weightOpts());
    at::NoGradGuard noGrad;
    for (auto &[n, x] : t.params)
      if (auto it = src.find(n); it != src.end())
        x.mul_(decay).add_(it->second, 1.0 - decay);
    t.changed = true;
    return 0;
  });
}

} // extern "C"
