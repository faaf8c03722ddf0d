//===- ProgramCheckpoint.cpp - a run's checkpoints and exports ------------===//
//
// The checkpoints a run writes every save_interval steps and reads on
// --resume, and --export-hf's Hugging Face checkpoints at the end
// (ProgramState.h).
//
//===----------------------------------------------------------------------===//

#include "ProgramSteps.h"

#include "rlhf/runtime/Files.h"
#include "rlhf/runtime/HfCheckpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace rlhf;
using namespace rlhf::exec;
namespace fs = std::filesystem;

namespace {

/// The config.json of model `m` as exported: an imported checkpoint's own
/// (its model_type, max_position_embeddings, sliding window) with the
/// numbers the run computed with; a plain arch as LLaMA, or as Qwen2 when it
/// has q/k/v biases (LLaMA's attention_bias would add an o_proj bias too).
HfArch exportArch(const ModelState &m, const TextTokenizer *tokenizer) {
  HfArch a;
  HfConfigError ignored;
  if (isHfCheckpoint(m.checkpoint))
    if (std::optional<HfArch> read = readHfConfig(m.checkpoint, ignored))
      a = *read;
  if (a.modelType.empty())
    a.modelType = m.cfg.shape.qkvBias ? "qwen2" : "llama";
  if (a.maxPositions <= 0)
    a.maxPositions = m.cfg.maxSeq;
  a.shape = m.cfg.shape;
  a.ropeTheta = m.cfg.ropeTheta;
  a.normEps = m.cfg.normEps;
  a.rope = m.cfg.rope;
  // transformers' generate() reads these from config.json when the
  // checkpoint has no generation_config.json.
  if (tokenizer) {
    a.bosId = tokenizer->bos();
    a.eosId = tokenizer->eos();
    a.padId = tokenizer->pad();
  }
  return a;
}

/// --keep-checkpoints K: removes OUT/checkpoints/step-N but the newest K up
/// to `latest` (rank 0, once the marker names the new one, so a crash here
/// leaves a complete checkpoint behind). Directories past `latest` (a save
/// cut short) are left for the run to overwrite. A removal that fails is a
/// warning: the run's results are safe either way.
void pruneCheckpoints(const rlhf_prog *p, int64_t latest) {
  const fs::path root = fs::path(p->outDir) / "checkpoints";
  std::vector<std::pair<int64_t, fs::path>> saved;
  std::error_code ec;
  try {
    for (const fs::directory_entry &e : fs::directory_iterator(root)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("step-", 0) != 0 || name.size() == 5 ||
          name.find_first_not_of("0123456789", 5) != std::string::npos ||
          !e.is_directory(ec))
        continue;
      int64_t n = std::strtoll(name.c_str() + 5, nullptr, 10);
      if (n >= 1 && n <= latest)
        saved.push_back({n, e.path()});
    }
  } catch (const fs::filesystem_error &e) {
    std::fprintf(stderr, "warning: --keep-checkpoints: cannot list '%s': %s\n",
                 root.string().c_str(), e.code().message().c_str());
    return;
  }
  if (int64_t(saved.size()) <= p->keepCheckpoints)
    return;
  std::sort(saved.begin(), saved.end());
  saved.resize(saved.size() - size_t(p->keepCheckpoints));
  for (const auto &[n, dir] : saved)
    if (fs::remove_all(dir, ec); ec)
      std::fprintf(stderr,
                   "warning: --keep-checkpoints: cannot remove '%s': %s\n",
                   dir.string().c_str(), ec.message().c_str());
}

} // namespace

fs::path rlhf::exec::checkpointDir(const rlhf_prog *p, int64_t step) {
  return fs::path(p->outDir) / "checkpoints" /
         ("step-" + std::to_string(step + 1));
}

void rlhf::exec::saveAll(rlhf_prog *p, int64_t step) {
  fs::path dir = checkpointDir(p, step);
  // What to do when a write fails (a full disk): the marker still names
  // the last complete checkpoint.
  auto hint = [&] {
    int64_t kept = latestCheckpoint(p);
    return kept >= 0 ? "; checkpoints/latest still names the checkpoint "
                       "after step " +
                           std::to_string(kept + 1) +
                           ", which is intact: free space and --resume"
                     : std::string("; free space and run again");
  };
  try {
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
      // An ema target's fp32 master weights, so a resumed run blends on
      // from exactly where this one was.
      saveCheckpoint((dir / m.name).string(), m.cfg,
                     m.master.empty() ? m.params : m.master, m.opt.get(),
                     m.layout, *p->world, step + 1);
    }
    saveAhead(p, dir, step);
    if (p->rank == 0) {
      writeTextFile((dir / "tokenizer.json").string(),
                    tokenizerIdentity(p).dump(2) + "\n");
      // Which program wrote it, for --resume to say when another resumes,
      // and how far dynamic sampling read each dataset ahead of the steps.
      nlohmann::json prog{{"program", p->name}};
      for (const DatasetState &d : p->datasets)
        if (d.skipped != 0)
          prog["skipped_rows"][d.name] = d.skipped;
      // What functions keep, as it stands for the next step.
      prog.update(fnStateJson(p));
      writeTextFile((dir / "program.json").string(), prog.dump(2) + "\n");
    }
    p->world->barrier();
    if (p->rank == 0) {
      // The marker moves only after every model is on disk, and only once
      // its new text is.
      fs::path tmp = fs::path(p->outDir) / "checkpoints" / "latest.tmp";
      writeTextFile(tmp.string(), std::to_string(step + 1) + "\n");
      fs::rename(tmp, fs::path(p->outDir) / "checkpoints" / "latest");
      if (p->keepCheckpoints > 0)
        pruneCheckpoints(p, step + 1);
    }
  } catch (const Error &e) {
    throw Error(std::string(e.what()) + hint());
  } catch (const fs::filesystem_error &e) {
    throw Error("saving the checkpoint after step " + std::to_string(step + 1) +
                ": " + e.code().message() + " (" + e.path1().string() + ")" +
                hint());
  }
  p->world->barrier();
}

void rlhf::exec::exportHf(rlhf_prog *p) {
  const fs::path root(p->exportHfDir);
  std::string programTokenizer;
  if (!p->tokenizerPath.empty())
    programTokenizer = fs::is_directory(p->tokenizerPath)
                           ? p->tokenizerPath
                           : fs::path(p->tokenizerPath).parent_path().string();
  for (ModelState &m : p->models) {
    if (!m.trainable)
      continue;
    if (m.cfg.shape.valueHead) {
      if (p->rank == 0)
        std::printf("export-hf: skipping '%s': transformers has no causal LM "
                    "with a value head\n",
                    m.name.c_str());
      continue;
    }
    // Master weights live in the optimizer's layout; bring them to the
    // parameters' as a checkpoint does.
    if (m.opt)
      m.opt->unshard();
    moveMoments(p, m, m.layout);
    ParamMap full = gatherWeights(m.cfg, m.offloaded ? m.host : m.params,
                                  m.opt.get(), m.layout, *p->world);
    if (p->rank == 0) {
      std::string tokenizerDir = !programTokenizer.empty() ? programTokenizer
                                 : isHfCheckpoint(m.checkpoint) ? m.checkpoint
                                                                : "";
      fs::path dir = root / m.name;
      try {
        saveHfCheckpoint(
            dir.string(), exportArch(m, p->tokenizer.get()), full,
            /*maxShardBytes=*/int64_t(5) << 30,
            p->exportBf16.value_or(p->weightDtype == at::kBFloat16),
            tokenizerDir);
        // An imported checkpoint's generation settings (bos, eos, pad ids)
        // still hold.
        fs::path gen = fs::path(m.checkpoint) / "generation_config.json";
        if (isHfCheckpoint(m.checkpoint) && fs::exists(gen))
          fs::copy_file(gen, dir / gen.filename(),
                        fs::copy_options::overwrite_existing);
      } catch (const fs::filesystem_error &e) {
        throw Error("--export-hf: cannot write '" + dir.string() +
                    "': " + e.code().message() +
                    "; the run's checkpoints in --out still hold the weights");
      }
      std::printf("export-hf: %s -> %s\n", m.name.c_str(),
                  dir.string().c_str());
      std::fflush(stdout);
    }
  }
  p->world->barrier();
}

const nlohmann::json &rlhf::exec::tokenizerIdentity(rlhf_prog *p) {
  if (!p->tokenizerId.is_null())
    return p->tokenizerId;
  const TextTokenizer &t = *p->tokenizer;
  // FNV-1a over every token's text: stable across builds, unlike std::hash.
  std::vector<int64_t> all;
  for (int64_t id = 0; id < t.vocabSize(); ++id)
    all.push_back(id);
  std::string text = t.decode(all);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  p->tokenizerId = {{"vocab_size", t.vocabSize()}, {"fingerprint", hex}};
  return p->tokenizerId;
}

int64_t rlhf::exec::latestCheckpoint(const rlhf_prog *p) {
  std::ifstream in(fs::path(p->outDir) / "checkpoints" / "latest");
  int64_t done = 0;
  if (!(in >> done) || done < 1)
    return -1;
  return done - 1;
}
