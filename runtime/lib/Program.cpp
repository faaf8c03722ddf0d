//===- Program.cpp - the executor behind compiled .rlhf programs ----------===//
//
// A run's life behind rlhf_program.h: the program's constants and command
// line, start (rendezvous, device, datasets, initial or resumed models),
// each step's begin and end (metrics, progress, traces, checkpoints), the
// datasets' batches, and the finish (--export-hf, memory against the plan).
// Values live in ProgramValues.cpp, the calls in ProgramCalls.cpp, the
// checkpoints and exports in ProgramCheckpoint.cpp, --out and resuming in
// ProgramResume.cpp (ProgramState.h).
//
//===----------------------------------------------------------------------===//

#include "PlanHardware.h"
#include "ProgramSteps.h"

#include "rlhf/runtime/Files.h"

#include <torch/headeronly/version.h>

#include <cerrno>

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

namespace {

void usage(const char *argv0, const rlhf_prog *p) {
  std::printf(
      "%s: a compiled rlhf program (%s)\n\n"
      "usage: rlhf-run -n %lld %s [options]\n"
      "   or: MASTER_ADDR=.. MASTER_PORT=.. RANK=.. WORLD_SIZE=%lld %s "
      "[options]\n\n"
      "options:\n"
      "  --steps N        train for N steps (default %lld, from the program)\n"
      "  --out DIR        metrics.jsonl, eval.jsonl and checkpoints go here\n"
      "                   (default %s-run)\n"
      "  --resume         continue from the last checkpoint in --out\n"
      "  --overwrite      start afresh in an --out that holds an earlier run,\n"
      "                   deleting its checkpoints and metrics (without it\n"
      "                   such an --out is an error, so nothing is lost)\n"
      "  --keep-checkpoints K  keep only the newest K checkpoints in\n"
      "                   OUT/checkpoints, removing older ones as new ones\n"
      "                   are complete (default: keep every checkpoint)\n"
      "  --export-hf DIR  at the end, write every trainable model as a\n"
      "                   Hugging Face checkpoint in DIR/<model>\n"
      "                   (config.json, safetensors, tokenizer files)\n"
      "  --export-dtype bf16|fp32  the exported weights' dtype (default the\n"
      "                   run's RLHF_PRECISION; fp32 keeps Adam's master\n"
      "                   weights exactly)\n"
      "  --data NAME=PATH read dataset NAME from PATH instead\n"
      "  --quiet          no per-step progress lines\n"
      "  --log-samples N  every N steps write the step's generations,\n"
      "                   decoded, with their rewards, to\n"
      "                   OUT/samples/step-S.jsonl, and each evaluation's\n"
      "                   to OUT/samples/eval-S.jsonl\n"
      "  --trace FILE     write what each rank ran (calls, reallocations,\n"
      "                   transfers, host functions) as a Chrome trace,\n"
      "                   extended as each step ends; open it in Perfetto\n"
      "                   beside the plan's `rlhfc --emit=trace`\n"
      "  --version        the rlhfc runtime and LibTorch it was linked with\n"
      "  --help           this text\n\n"
      "environment (docs/runtime.md):\n"
      "  RLHF_DEVICE=cpu|cuda|auto    where workers run (default: a visible\n"
      "                               GPU, each rank cuda:LOCAL_RANK)\n"
      "  RLHF_PRECISION=bf16|fp32     weights and activations (default bf16\n"
      "                               on CUDA, fp32 on the CPU)\n"
      "  RLHF_BACKEND=gloo|nccl       collectives (default NCCL when every\n"
      "                               rank owns a GPU, else Gloo)\n"
      "  RLHF_COMM_TIMEOUT_MS=N       a collective waiting longer fails the\n"
      "                               job, naming the rank (default 300000)\n"
      "  RLHF_CUDA_GRAPHS=0|require   decode steps eagerly, or fail when a\n"
      "                               step cannot be captured\n"
      "  RLHF_CUDA_IPC=0              ranks sharing a GPU reallocate through\n"
      "                               host memory\n"
      "  RLHF_HOST_FNS=cpu|device     host functions on the CPU, or (the\n"
      "                               default) on the rank's GPU\n"
      "  RLHF_TP_SHARD_SEQUENCE=0     under tp, every rank holds whole\n"
      "                               sequences between layers (no Megatron\n"
      "                               sequence parallelism; more memory)\n"
      "  RLHF_FUSED_KERNELS=0|cpu     separate LibTorch ops instead of the\n"
      "                               fused CUDA kernels, or their host\n"
      "                               bodies on the CPU (for tests)\n"
      "  RLHF_WATCHDOG_STALL_S=N      an NCCL collective stalled this long\n"
      "                               ends the process (default 120)\n"
      "  RLHF_PIPELINE_SCHEDULE=sequential|1f1b  train pipeline stages\n"
      "                               one micro-batch at a time (for\n"
      "                               comparison; slower), or 1F1B (default)\n"
      "An unknown value of any of these stops the program at start.\n"
      "SIGUSR1 saves a checkpoint after the step in progress and stops\n"
      "(exit 75; continue with --resume), as before a time limit.\n",
      argv0, p->name.c_str(), (long long)p->gpus, argv0, (long long)p->gpus,
      argv0, (long long)p->steps, p->name.c_str());
}

} // namespace

extern "C" {

rlhf_prog *rlhf_prog_create(int argc, char **argv, const char *name,
                            int64_t steps, int64_t seed, int64_t saveInterval,
                            int64_t gpus, double predictedIteration) {
  // Before LibTorch, Gloo or CUDA start a thread.
  watchStopRequests();
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
  static const option opts[] = {
      {"steps", required_argument, nullptr, 's'},
      {"out", required_argument, nullptr, 'o'},
      {"resume", no_argument, nullptr, 'r'},
      {"overwrite", no_argument, nullptr, 'w'},
      {"export-hf", required_argument, nullptr, 'x'},
      {"export-dtype", required_argument, nullptr, 'X'},
      {"data", required_argument, nullptr, 'd'},
      {"quiet", no_argument, nullptr, 'q'},
      {"trace", required_argument, nullptr, 't'},
      {"log-samples", required_argument, nullptr, 'l'},
      {"keep-checkpoints", required_argument, nullptr, 'k'},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, 'v'},
      {nullptr, 0, nullptr, 0}};
  opterr = 0;
  // optarg as an integer of at least `min`; `need` says what else it takes.
  auto count = [&](const char *need, long long min) {
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(optarg, &end, 10);
    if (!end || *end || n < min || errno == ERANGE)
      die(p, std::string(need) + ", got '" + optarg + "'");
    return int64_t(n);
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, nullptr)) != -1) {
    switch (c) {
    case 's':
      p->steps = count("--steps needs a non-negative integer", 0);
      break;
    case 'o':
      p->outDir = optarg;
      break;
    case 'r':
      p->resume = true;
      break;
    case 'w':
      p->overwrite = true;
      break;
    case 'x':
      if (!*optarg)
        die(p, "--export-hf needs a directory; see --help");
      p->exportHfDir = optarg;
      break;
    case 'X':
      if (std::string(optarg) != "bf16" && std::string(optarg) != "fp32")
        die(p, std::string("--export-dtype needs bf16 or fp32, got '") +
                   optarg + "'");
      p->exportBf16 = std::string(optarg) == "bf16";
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
    case 'l':
      p->samples.interval =
          count("--log-samples needs a number of steps, 1 or more", 1);
      break;
    case 'k':
      p->keepCheckpoints = count(
          "--keep-checkpoints needs a number of checkpoints, 1 or more", 1);
      break;
    case 't':
      p->tracePath = optarg;
      break;
    case 'h': // once under rlhf-run, not once per rank
      if (p->rank <= 0)
        usage(argv[0], p);
      std::exit(0);
    case 'v':
      if (p->rank <= 0)
        std::printf("%s: compiled by rlhfc; runtime %s, LibTorch %s\n",
                    p->name.c_str(), RLHFC_VERSION, TORCH_VERSION);
      std::exit(0);
    default:
      for (const option *o = opts; o->name; ++o)
        if (optopt == o->val && o->has_arg == required_argument)
          die(p, std::string("--") + o->name + " needs a value; see --help");
      die(p,
          std::string("unknown option '") + argv[optind - 1] + "'; see --help");
    }
  }
  if (optind < argc)
    die(p,
        std::string("unexpected argument '") + argv[optind] + "'; see --help");
  if (p->exportBf16 && p->exportHfDir.empty())
    die(p, "--export-dtype sets what --export-hf writes; add --export-hf DIR");
  if (p->keepCheckpoints > 0 && p->saveInterval <= 0)
    die(p, "--keep-checkpoints limits the checkpoints a run saves, but this "
           "program saves none; compile it with 'save_interval' in its run");
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
  m.cfg.shape.qkvBias = a[9] != 0;
  m.cfg.maxSeq = a[6];
  m.trainable = trainable != 0;
  m.adam = AdamSettings{lr, beta1, beta2, eps, weightDecay, gradClip};
  m.checkpoint = checkpoint ? checkpoint : "";
  m.initial = m.layout = layoutFrom(layout);
  p->models.push_back(std::move(m));
}

void rlhf_prog_set_model_rope(rlhf_prog *p, const char *name, double theta,
                              double normEps, double factor, double lowFreq,
                              double highFreq, int64_t originalMaxSeq) {
  for (ModelState &m : p->models)
    if (m.name == name) {
      m.cfg.ropeTheta = theta;
      m.cfg.normEps = normEps;
      m.cfg.rope = RopeScaling{factor, lowFreq, highFreq, originalMaxSeq};
    }
}

void rlhf_prog_set_model_schedule(rlhf_prog *p, const char *name,
                                  const char *schedule, int64_t warmupSteps,
                                  int64_t decaySteps, double minLr) {
  guarded(p, "model", [&] {
    std::optional<LrSchedule::Kind> kind = LrSchedule::parse(schedule);
    if (!kind || warmupSteps < 0 || decaySteps < 0 || !(minLr >= 0))
      throw Error(std::string("the program gives model '") + name +
                  "' an invalid learning-rate schedule ('" + schedule +
                  "'); compile it again with this runtime's rlhfc");
    for (ModelState &m : p->models)
      if (m.name == name)
        m.adam.schedule = LrSchedule{*kind, warmupSteps, decaySteps, minLr};
  });
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

void rlhf_prog_set_dataset_template(rlhf_prog *p, const char *name,
                                    const char *tmpl) {
  guarded(p, "dataset", [&] {
    for (DatasetState &d : p->datasets)
      if (d.name == name)
        d.promptTemplate.emplace(tmpl);
    return 0;
  });
}

void rlhf_prog_set_hardware(rlhf_prog *p, const char *name) {
  p->plannedHardware = name ? name : "";
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
                  (cfg.worldSize == 1 ? " worker" : " workers") +
                  "; run it with rlhf-run -n " + std::to_string(p->gpus));
    p->device = selectDevice(cfg);
    if (!p->device.is_cuda()) // the end-of-run tensor peak, as runWorker's
      trackHostAllocations();
    p->peaks.emplace(p->device);
    p->weightDtype = selectPrecision(cfg, p->device);
    checkRuntimeSwitches();
    p->commTimeoutS = std::chrono::duration<double>(cfg.timeout).count();
    p->world = createWorldCommunicator(cfg, p->device);
    // Another GPU than the plan's, or a plan that does not fit it: said
    // now, not after an out-of-memory error mid-step.
    if (p->device.is_cuda() && p->rank == 0 && !p->quiet) {
      std::string note =
          hardwareNote(p->plannedHardware, deviceName(p->device));
      if (!note.empty())
        std::fprintf(stderr, "%s\n", note.c_str());
    }
    std::string warning =
        planFitWarning(*p->world, p->device, p->predictedMemory);
    if (!warning.empty())
      std::fprintf(stderr, "%s\n", warning.c_str());
    p->replicated = Layout{0, 1, p->gpus, 1};
    p->runStart = Clock::now();

    // Datasets, and one character vocabulary over all of them. A --data
    // name the program lacks is a typo that would silently train on the
    // program's own file.
    for (const auto &[name, path] : p->dataOverride)
      if (std::none_of(p->datasets.begin(), p->datasets.end(),
                       [&](const DatasetState &d) { return d.name == name; })) {
        std::string names;
        for (const DatasetState &d : p->datasets)
          names += (names.empty() ? "" : ", ") + d.name;
        throw Error("--data " + name + "=" + path +
                    ": the program has no "
                    "dataset '" +
                    name + "' (its datasets: " + names + ")");
      }
    std::vector<const JsonlDataset *> all;
    for (DatasetState &d : p->datasets) {
      if (auto it = p->dataOverride.find(d.name); it != p->dataOverride.end())
        d.path = it->second;
      d.data = std::make_unique<JsonlDataset>(
          d.path, d.fields, d.promptTemplate ? &*d.promptTemplate : nullptr);
      all.push_back(d.data.get());
    }
    if (p->tokenizerPath.empty())
      p->tokenizer = std::make_unique<CharTokenizer>(all);
    else
      p->tokenizer = loadTokenizer(p->tokenizerPath);
    // pad_token = eos_token (Qwen2.5 base, many LLaMA setups): generated
    // sequences carry their own masks, but data masks are `token != pad`,
    // so SFT, DPO and reward-model losses would never see a sequence end.
    if (p->tokenizer->pad() == p->tokenizer->eos() && p->rank == 0)
      std::fprintf(stderr,
                   "warning: tokenizer '%s' uses its eos token (id %lld) as "
                   "pad: losses on dataset sequences (sft, dpo, reward "
                   "models) mask every eos out, so the model does not learn "
                   "to stop there; name a distinct special token as "
                   "\"pad_token\" in tokenizer_config.json if you train on "
                   "data\n",
                   p->tokenizerPath.c_str(), (long long)p->tokenizer->eos());
    for (ModelState &m : p->models)
      if (p->tokenizer->vocabSize() > m.cfg.shape.vocab)
        throw Error((p->tokenizerPath.empty()
                         ? "the datasets use " +
                               std::to_string(p->tokenizer->vocabSize()) +
                               " token ids (characters plus pad/bos/eos)"
                         : "tokenizer '" + p->tokenizerPath + "' has " +
                               std::to_string(p->tokenizer->vocabSize()) +
                               " token ids") +
                    " but model '" + m.name + "' has a vocabulary of " +
                    std::to_string(m.cfg.shape.vocab) +
                    "; use a model with a larger vocab");
    // An answer wider than its dataset keeps would be cut, and exact_match
    // would score a response that matches the cut answer as right.
    for (const DatasetState &d : p->datasets) {
      if (std::find(d.fields.begin(), d.fields.end(), "answer") ==
          d.fields.end())
        continue;
      const int64_t width = std::max<int64_t>(d.responseLen, 1);
      int64_t longest = 0;
      size_t row = 0;
      for (size_t i = 0; i < d.data->size(); ++i) {
        auto n = int64_t(
            p->tokenizer->encode((*d.data)[i].at("answer"), false).size());
        if (n > longest) {
          longest = n;
          row = i;
        }
      }
      if (longest > width)
        throw Error(
            "dataset '" + d.name + "' ('" + d.path + "'): the answer of row " +
            std::to_string(row + 1) + " is " + std::to_string(longest) +
            " tokens, but max_response_len = " + std::to_string(d.responseLen) +
            " keeps " + std::to_string(width) + "; set max_response_len = " +
            std::to_string(longest) + " or more in the dataset");
    }

    openRun(p);
    p->world->barrier();
    shareEvalLog(p);
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
  p->filter.rounds.clear();
  p->samples.seq = p->samples.score = nullptr;
  // Before the run's first step; later ones run at the end of a step.
  guarded(p, "eval", [&] {
    evaluateIfDue(p, step);
    return 0;
  });
}

void rlhf_step_end(rlhf_prog *p, int64_t step) {
  guarded(p, "step end", [&] {
    double stepTime =
        std::chrono::duration<double>(Clock::now() - p->stepStart).count();
    p->record("time/step", stepTime, true, true);
    p->metrics.resize(p->metricCursor);
    // Combine every rank's slots: times take the slowest rank, the rest the
    // mean of the ranks that have them.
    // A last slot says whether the rank was asked to stop (SIGUSR1), so
    // ranks that got the signal before and after this point agree.
    const int64_t K = int64_t(p->metrics.size());
    at::Tensor mine = at::zeros({2 * K + 1}, at::kDouble);
    for (int64_t i = 0; i < K; ++i) {
      mine[2 * i] = p->metrics[size_t(i)].value;
      mine[2 * i + 1] = p->metrics[size_t(i)].valid ? 1.0 : 0.0;
    }
    mine[2 * K] = stopRequested() ? 1.0 : 0.0;
    at::Tensor all = p->world->allGather(mine.unsqueeze(0));
    const bool stop =
        all.select(1, 2 * K).max().item<double>() > 0 && step + 1 < p->steps;
    nlohmann::ordered_json row;
    row["step"] = step + 1; // steps done, as the progress line counts
    std::string line;
    for (int64_t i = 0; i < K; ++i) {
      const Metric &m = p->metrics[size_t(i)];
      std::optional<double> combined = combinedMetric(all, size_t(i), m.isTime);
      if (!combined)
        continue;
      const double v = *combined;
      // A key that an earlier call of the step recorded (two exact_match
      // calls, two inferences of one model) goes on as key#2, key#3, ...
      std::string key = m.key;
      for (int k = 2; row.contains(key); ++k)
        key = m.key + "#" + std::to_string(k);
      row[key] = v;
    }
    if (p->rank == 0) {
      writeTextFile((fs::path(p->outDir) / "metrics.jsonl").string(),
                    row.dump() + "\n", std::ios::app);
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
    // Before the checkpoint, which saves what functions keep for the next
    // step.
    endStepFnState(p, all);
    if (p->samples.interval > 0 && (step + 1) % p->samples.interval == 0)
      writeSamples(p, "step-" + std::to_string(step + 1) + ".jsonl", step + 1,
                   0, -1);
    if (p->saveInterval > 0 &&
        ((step + 1) % p->saveInterval == 0 || step + 1 == p->steps || stop))
      saveAll(p, step);
    p->values.clear();
    if (stop) {
      // The evaluation due now runs when the run resumes.
      if (p->rank == 0) {
        std::printf(
            p->saveInterval > 0
                ? "stopped on request (SIGUSR1) after step %lld of %lld, "
                  "checkpoint saved: continue with --resume\n"
                : "stopped on request (SIGUSR1) after step %lld of %lld; "
                  "the program saves no checkpoints (save_interval = 0), "
                  "so the run cannot be resumed\n",
            (long long)step + 1, (long long)p->steps);
        std::fflush(stdout);
      }
      p->steps = step + 1;
      p->stoppedEarly = true;
      return 0;
    }
    evaluateIfDue(p, step + 1);
    return 0;
  });
  // The generated loop runs to the program's steps: a stopped run ends here.
  if (p->stoppedEarly)
    std::exit(rlhf_prog_finish(p) == 0 ? RLHF_EXIT_STOPPED : 1);
}

int rlhf_prog_finish(rlhf_prog *p) {
  return guarded(p, "finish", [&] {
    // A stopped run's models are not final: --resume exports them.
    if (!p->exportHfDir.empty() && !p->stoppedEarly)
      exportHf(p);
    at::Tensor peaks =
        at::tensor({peakRssBytes(), p->peaks->overall()}, at::kDouble)
            .view({1, 2});
    at::Tensor all = p->world->allGather(peaks);
    if (p->rank == 0) {
      double wall =
          std::chrono::duration<double>(Clock::now() - p->runStart).count();
      const bool gpu = p->device.is_cuda();
      // The plan prices its cluster's GPUs: name the one that ran, so that
      // a run on other hardware is not read as the plan's error.
      const std::string ranOn =
          gpu ? "; ran on " + deviceName(p->device) : "; ran on the CPU";
      const std::string planned = p->plannedHardware.empty()
                                      ? "the planned hardware"
                                      : p->plannedHardware;
      const long long ran = (long long)(p->steps - p->firstStep);
      std::printf("%s: %lld step%s in %.1f s (plan predicted %.3g s/step "
                  "on %s%s)\n",
                  p->stoppedEarly ? "stopped" : "done", ran,
                  ran == 1 ? "" : "s", wall, p->predictedIteration,
                  planned.c_str(), ranOn.c_str());
      if (std::string f = filterReport(p); !f.empty())
        std::printf("%s\n", f.c_str());
      if (std::string f = evalReport(p); !f.empty())
        std::printf("%s\n", f.c_str());
      std::printf("memory per worker: planned peak (model state and "
                  "activations on its GPU) vs measured peak %s\n",
                  gpu ? "of the CUDA caching allocator (and RSS)"
                      : "of tensor bytes on the CPU (and RSS)");
      for (int64_t r = 0; r < p->gpus; ++r) {
        double pred = r < int64_t(p->predictedMemory.size())
                          ? p->predictedMemory[size_t(r)]
                          : 0;
        double rss = all[r][0].item<double>(), dev = all[r][1].item<double>();
        std::printf("  rank %lld: predicted %.2f MiB, measured %s peak %.1f "
                    "MiB (%.0f%% of predicted), peak RSS %.1f MiB\n",
                    (long long)r, pred / (1 << 20), gpu ? "GPU" : "tensor",
                    dev / (1 << 20), pred > 0 ? 100.0 * dev / pred : 0.0,
                    rss / (1 << 20));
      }
      if (p->weightDtype != at::kBFloat16)
        std::printf("  (plans price bf16 weights and activations; this run "
                    "held them in fp32, about twice that: RLHF_PRECISION=bf16 "
                    "runs as planned)\n");
      std::fflush(stdout);
    }
    p->world->barrier();
    p->world.reset();
    delete p;
    return 0;
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

} // extern "C"
