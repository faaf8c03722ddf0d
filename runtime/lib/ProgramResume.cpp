//===- ProgramResume.cpp - a run's --out, fresh or resumed ----------------===//
//
// At start, after the datasets: what --out holds and what the run does with
// it (a fresh run refuses an earlier one unless --overwrite, --resume
// checks the checkpoint against the program on every rank), the lock that
// keeps a second run out, and the models, initialised or loaded.
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include "rlhf/runtime/Files.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <unistd.h>

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

namespace {

/// Holds OUT/.lock for this process's life (the kernel drops it at exit,
/// also a killed one's): one run at a time writes an --out. A second one
/// would interleave its metrics and checkpoints with the first's, or with
/// --overwrite delete them under it.
void lockOutDir(const std::string &outDir) {
  const std::string path = (fs::path(outDir) / ".lock").string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return; // makeDir checked the folder; an odd file system goes unlocked
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) { // no locks on this file system
      ::close(fd);
      return;
    }
    char pid[32] = {0};
    ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    std::string who = n > 0 ? std::string(pid, size_t(n)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    throw Error("--out '" + outDir + "' is in use by another run" +
                (who.empty() ? std::string() : " (process " + who + ")") +
                "; wait for it to end, or give another --out");
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0)
    (void)!::pwrite(fd, me.data(), me.size(), 0);
  // The descriptor stays open: closing it would release the lock.
}

/// Every rank takes rank 0's `text`, what the checkpoint's functions kept
/// (adaptive KL coefficients, running moments), for their calls' first use.
void broadcastFnState(rlhf_prog *p, const std::string &text) {
  at::Tensor n = at::tensor({int64_t(text.size())}, at::kLong);
  p->world->broadcast(n, 0);
  if (n.item<int64_t>() == 0)
    return;
  // Rank 0's bytes, one per element: a few hundred at most.
  at::Tensor bytes = at::zeros({n.item<int64_t>()}, at::kLong);
  auto b = bytes.accessor<int64_t, 1>();
  for (size_t i = 0; i < text.size(); ++i)
    b[int64_t(i)] = static_cast<unsigned char>(text[i]);
  p->world->broadcast(bytes, 0);
  std::string got;
  auto r = bytes.accessor<int64_t, 1>();
  for (int64_t i = 0; i < bytes.numel(); ++i)
    got.push_back(char(r[i]));
  restoreFnState(p, nlohmann::json::parse(got, nullptr, false));
}

} // namespace

void rlhf::exec::openRun(rlhf_prog *p) {
  int64_t resumed = -1;
  const fs::path ckpts = fs::path(p->outDir) / "checkpoints";
  const fs::path metricsFile = fs::path(p->outDir) / "metrics.jsonl";
  std::error_code sizeError;
  const bool hasMetrics =
      fs::file_size(metricsFile, sizeError) > 0 && !sizeError;
  if (p->resume && p->overwrite)
    throw Error("--resume continues the run in --out and --overwrite "
                "deletes it; give one of them");
  if (p->resume) {
    resumed = latestCheckpoint(p);
    if (resumed < 0 && fs::exists(ckpts / "latest"))
      throw Error("--resume: '" + (ckpts / "latest").string() +
                  "' does not hold a step number; write the step of a "
                  "complete checkpoint in '" +
                  ckpts.string() + "' (step-N) to it");
    if (resumed < 0) {
      if (hasMetrics)
        throw Error("--resume: no checkpoint in '" + ckpts.string() +
                    "': the run there stopped before its first "
                    "save_interval; start it afresh with --overwrite "
                    "(deletes its metrics), or give another --out");
      throw Error("--resume: no checkpoint in '" + ckpts.string() +
                  "'; run without --resume first, or point --out at the run");
    }
    const int64_t done = resumed + 1;
    if (p->steps < done)
      throw Error("--resume: the checkpoint in '" + ckpts.string() +
                  "' is after step " + std::to_string(done) +
                  ", past --steps " + std::to_string(p->steps) +
                  "; give --steps above " + std::to_string(done) +
                  " to train further");
  } else {
    // A fresh run into an earlier one's --out would truncate its metrics
    // and mix its checkpoints with the new ones.
    const int64_t earlier = latestCheckpoint(p);
    if ((earlier >= 0 || hasMetrics) && !p->overwrite)
      throw Error(
          "--out '" + p->outDir + "' holds an earlier run (" +
          (earlier >= 0 ? "checkpoint after step " + std::to_string(earlier + 1)
                        : std::string("metrics.jsonl")) +
          (earlier >= 0
               ? "); continue it with --resume, start afresh with "
                 "--overwrite (deletes its checkpoints and metrics), or "
                 "give another --out"
               : " but no checkpoint: it stopped before its first "
                 "save_interval, so there is nothing to resume); start "
                 "afresh with --overwrite (deletes its metrics), or give "
                 "another --out"));
    // The earlier run is deleted below, once the other outputs are known
    // to be writable: a typo in --trace must not cost it.
  }
  // Every rank read checkpoints/latest itself. Nodes whose --out is not
  // one shared file system may read different steps, and would each
  // resume its own: a mixed state, trained on silently.
  {
    at::Tensor all = p->world->allGather(
        at::tensor({double(resumed)}, at::TensorOptions().dtype(at::kDouble)));
    if (all.min().item<double>() != all.max().item<double>()) {
      std::string seen;
      for (int64_t r = 0; r < all.numel(); ++r) {
        const int64_t step = int64_t(all[r].item<double>());
        seen += (r ? ", " : "") + std::string("rank ") + std::to_string(r) +
                (step < 0 ? " none" : " step " + std::to_string(step + 1));
      }
      throw Error("the ranks see different checkpoints in --out '" + p->outDir +
                  "' (" + seen +
                  "); every node must see the same folder: put --out on a "
                  "file system all nodes share");
    }
  }
  // Which models the checkpoint holds, as rank 0 (which reads it) sees
  // them. A trainable model must be there: starting it afresh would
  // silently restart its training under a "resumed" banner.
  at::Tensor saved = at::zeros({int64_t(p->models.size())}, at::kLong);
  // Batches dynamic sampling drew ahead of the steps, per dataset.
  at::Tensor skipped = at::zeros({int64_t(p->datasets.size())}, at::kLong);
  std::string fnState; // program.json, as text, for functions' state
  if (resumed >= 0 && p->rank == 0) {
    const fs::path dir = checkpointDir(p, resumed);
    auto listing = [](const fs::path &d) {
      std::vector<std::string> names;
      std::error_code ec;
      for (const auto &e : fs::directory_iterator(d, ec))
        if (e.is_directory())
          names.push_back(e.path().filename().string());
      std::sort(names.begin(), names.end());
      std::string out;
      for (const std::string &n : names)
        out += (out.empty() ? "" : ", ") + n;
      return out.empty() ? std::string("none") : out;
    };
    if (!fs::is_directory(dir))
      throw Error("--resume: checkpoints/latest names step " +
                  std::to_string(resumed + 1) + ", but '" + dir.string() +
                  "' is missing (checkpoints there: " + listing(ckpts) +
                  "); write the step of a complete one to '" +
                  (ckpts / "latest").string() +
                  "', or start afresh with "
                  "--overwrite");
    // The token ids the weights learned must mean what they meant: the
    // character vocabulary comes from the datasets (--data).
    if (std::ifstream in(dir / "tokenizer.json"); in) {
      auto saved = nlohmann::json::parse(in, nullptr, false);
      const nlohmann::json &now = tokenizerIdentity(p);
      // A damaged record must not turn the check off.
      if (saved.is_discarded() || !saved.is_object())
        throw Error("--resume: '" + (dir / "tokenizer.json").string() +
                    "' is not valid json, so the run's token ids cannot "
                    "be checked against the checkpoint's; resume from an "
                    "earlier step-N (write N to checkpoints/latest)");
      if (saved != now)
        throw Error(
            "--resume: the run's token ids differ from the checkpoint's "
            "(a vocabulary of " +
            std::to_string(now.value("vocab_size", int64_t(0))) + " against " +
            std::to_string(saved.value("vocab_size", int64_t(0))) +
            ", or other tokens); resume with the datasets (--data) and "
            "tokenizer the run started with, since characters seen only "
            "in new data change every id");
    }
    // Another program may resume a checkpoint on purpose (a new learning
    // rate, another algorithm on the same models), but not by accident
    // unseen.
    if (std::ifstream in(dir / "program.json"); in) {
      auto wrote = nlohmann::json::parse(in, nullptr, false);
      // "skipped" counted whole batches, before gen_batch let a round
      // draw other row counts.
      for (const std::string key : {"skipped_rows", "skipped"})
        if (!wrote.is_discarded() && wrote.is_object() && wrote.contains(key) &&
            wrote[key].is_object())
          for (size_t i = 0; i < p->datasets.size(); ++i) {
            const DatasetState &d = p->datasets[i];
            if (wrote[key].contains(d.name))
              skipped[int64_t(i)] = wrote[key].value(d.name, int64_t(0)) *
                                    (key == "skipped" ? d.batch : 1);
          }
      // restoreFnState takes its own keys from it.
      if (!wrote.is_discarded() && wrote.is_object())
        fnState = wrote.dump();
      if (!wrote.is_discarded() && wrote.is_object() &&
          wrote.value("program", p->name) != p->name)
        std::fprintf(stderr,
                     "%s: warning: --resume: checkpoint '%s' was written by "
                     "program '%s'; it continues as '%s'\n",
                     p->name.c_str(), dir.string().c_str(),
                     wrote.value("program", std::string()).c_str(),
                     p->name.c_str());
    }
    for (size_t i = 0; i < p->models.size(); ++i) {
      const ModelState &m = p->models[i];
      bool there = fs::exists(dir / m.name / "state.json");
      saved[int64_t(i)] = there ? 1 : 0;
      if (m.trainable && !there)
        throw Error("--resume: checkpoint '" + dir.string() +
                    "' has no model '" + m.name + "' (it has: " + listing(dir) +
                    "); resume with the program that wrote it, or start "
                    "afresh with --overwrite");
    }
  }
  p->world->broadcast(saved, 0);
  p->world->broadcast(skipped, 0);
  broadcastFnState(p, fnState);
  for (size_t i = 0; i < p->datasets.size(); ++i)
    p->datasets[i].skipped = skipped[int64_t(i)].item<int64_t>();
  for (size_t i = 0; i < p->models.size(); ++i) {
    ModelState &m = p->models[i];
    fs::path ckpt = checkpointDir(p, resumed) / m.name;
    if (resumed >= 0 && saved[int64_t(i)].item<int64_t>()) {
      CheckpointState s =
          loadCheckpoint(ckpt.string(), m.cfg, m.layout, *p->world);
      if (s.step != resumed + 1)
        throw Error("--resume: '" + ckpt.string() +
                    "' holds the state after "
                    "step " +
                    std::to_string(s.step) +
                    " (its state.json), not after step " +
                    std::to_string(resumed + 1) +
                    "; a checkpoint was moved or copied over another; "
                    "resume from a step-N whose state.json says N");
      // The checkpoint holds fp32 weights (the master weights when
      // there were any); low-precision runs compute with a cast.
      ParamMap weights = toDevice(std::move(s.params), p->device);
      m.params = toDevice(weights, p->device, p->weightDtype);
      m.changed = true;
      // Of frozen models only ema targets are saved: their fp32 master.
      if (!m.trainable && p->weightDtype != at::kFloat)
        m.master = weights;
      if (m.trainable) {
        m.opt = std::make_unique<Adam>(m.adam);
        m.opt->restore(toDevice(std::move(s.adamM), p->device),
                       toDevice(std::move(s.adamV), p->device), s.adamSteps,
                       p->weightDtype != at::kFloat ? std::move(weights)
                                                    : ParamMap{});
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
  p->resumedFrom = resumed;

  // Directories that cannot be made fail now, not after training.
  auto makeDir = [](const std::string &option, const fs::path &dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
      throw Error(option + ": cannot create directory '" + dir.string() + "'" +
                  (ec ? " (" + ec.message() + ")" : std::string()) +
                  "; name a writable directory");
  };
  if (!p->exportHfDir.empty() && p->rank == 0)
    makeDir("--export-hf", p->exportHfDir);
  if (!p->tracePath.empty() && p->rank == 0) {
    errno = 0;
    if (!std::ofstream(p->tracePath, std::ios::app))
      throw Error("--trace: cannot write '" + p->tracePath + "'" + ioReason() +
                  "; name a file in a writable directory");
  }
  if (p->rank == 0) {
    makeDir("--out", p->outDir);
    lockOutDir(p->outDir);
  }
  if (!p->resume && p->overwrite && p->rank == 0) {
    std::error_code ec;
    fs::remove_all(ckpts, ec);
    fs::remove(metricsFile, ec);
    fs::remove(fs::path(p->outDir) / "eval.jsonl", ec);
    fs::remove_all(fs::path(p->outDir) / "samples", ec);
  }

  if (p->rank == 0) {
    makeDir("--out", fs::path(p->outDir) / "checkpoints");
    // A resumed run keeps the metrics and evaluations up to its checkpoint
    // and drops the rest, so no step appears twice.
    for (const char *file : {"metrics.jsonl", "eval.jsonl"}) {
      fs::path path = fs::path(p->outDir) / file;
      std::string kept;
      if (resumed >= 0) {
        std::ifstream in(path);
        for (std::string line; std::getline(in, line);) {
          auto j = nlohmann::json::parse(line, nullptr, false);
          int64_t step = j.is_discarded() ? -1 : j.value("step", int64_t(-1));
          if (step < 0 || step > resumed + 1)
            continue;
          kept += line + "\n";
          if (std::string(file) == "eval.jsonl")
            p->eval.logged.insert(step);
        }
      }
      if (resumed >= 0 || std::string(file) == "metrics.jsonl" ||
          fs::exists(path))
        writeTextFile(path.string(), kept);
    }
    const std::string steps =
        p->firstStep < p->steps
            ? "steps " + std::to_string(p->firstStep + 1) + ".." +
                  std::to_string(p->steps)
            : "all " + std::to_string(p->steps) +
                  " steps done, nothing to train (give --steps above " +
                  std::to_string(p->steps) + " to go on)";
    std::printf("%s: %lld worker%s on %s (%s), %s, output in %s%s\n",
                p->name.c_str(), (long long)p->gpus, p->gpus == 1 ? "" : "s",
                p->device.is_cuda() ? "CUDA" : "the CPU",
                p->world->backendName(), steps.c_str(), p->outDir.c_str(),
                resumed >= 0 ? (" (resumed after step " +
                                std::to_string(resumed + 1) + ")")
                                   .c_str()
                             : "");
    std::fflush(stdout);
  }
}
