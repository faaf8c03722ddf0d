//===- rlhf-cost-validate.cpp - cost model vs published measurements ------===//
//
// Predicts every row of docs/validation/published.csv with the cost model and
// prints a markdown table of published vs predicted values. The last line is
// `median abs error: X%`. With --update FILE it rewrites the table between
// the validation markers in FILE; with --check FILE it fails if that table is
// stale (the docs.cost-model-current test). --section names the table's
// markers, so one document holds the published and our own measured points.
//
//===----------------------------------------------------------------------===//

#include "rlhfc/CostModel/CostModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

using namespace llvm;
using namespace rlhfc::cost;

static cl::OptionCategory validateCat("rlhf-cost-validate options");
static cl::opt<std::string> csvPath(cl::Positional, cl::desc("<published.csv>"),
                                    cl::Required, cl::cat(validateCat));
static cl::opt<std::string>
    updateFile("update", cl::desc("Rewrite the table in this markdown file"),
               cl::value_desc("file"), cl::cat(validateCat));
static cl::opt<double>
    maxMedian("max-median",
              cl::desc("Fail if the median abs error (%) exceeds this"),
              cl::init(-1), cl::cat(validateCat));
static cl::opt<std::string>
    checkFile("check", cl::desc("Fail if the table in this file is stale"),
              cl::value_desc("file"), cl::cat(validateCat));
static cl::opt<std::string> calibrationFile(
    "calibration",
    cl::desc("Efficiency factors to predict with instead of the "
             "presets' (JSON, see docs/cost-model.md)"),
    cl::value_desc("file"), cl::cat(validateCat));
static cl::opt<std::string>
    idPattern("ids", cl::desc("Only the rows whose id matches this regex"),
              cl::value_desc("regex"), cl::cat(validateCat));
static cl::opt<std::string>
    sectionName("section",
                cl::desc("Name of the table's markers in the markdown file "
                         "(<!-- NAME:begin --> ... <!-- NAME:end -->)"),
                cl::init("validation-table"), cl::value_desc("name"),
                cl::cat(validateCat));
static cl::opt<std::string> predictionsFile(
    "emit-predictions",
    cl::desc("Also write each predicted row's value and peak memory per GPU "
             "to this CSV (what rlhf-bench-gpu-runtime --predicted reads)"),
    cl::value_desc("file"), cl::cat(validateCat));

namespace {

/// Splits one CSV line, honouring double quotes.
std::vector<std::string> splitCsv(StringRef line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

rlhf::ModelShape shape(int64_t l, int64_t h, int64_t a, int64_t kv, int64_t ffn,
                       int64_t v) {
  return rlhf::ModelShape{l, h, a, kv, ffn, v};
}

/// GPT-style MLPs (two h x 4h matrices) as the equivalent SwiGLU width: the
/// same parameters and FLOPs.
rlhf::ModelShape gpt(int64_t l, int64_t h, int64_t a, int64_t v = 51200) {
  return shape(l, h, a, a, (8 * h) / 3, v);
}

/// Architectures of the models in the published data (see SOURCES.md).
std::optional<rlhf::ModelShape> modelShape(StringRef name) {
  static const StringMap<rlhf::ModelShape> models = {
      {"gpt_1p7b", gpt(24, 2304, 24)},
      {"gpt_3p6b", gpt(30, 3072, 32)},
      {"gpt_7p5b", gpt(36, 4096, 32)},
      {"gpt_18p4b", gpt(40, 6144, 48)},
      {"gpt_22b", gpt(48, 6144, 64)},
      {"gpt_39p1b", gpt(48, 8192, 64)},
      {"gpt_76p1b", gpt(60, 10240, 80)},
      {"gpt_145p6b", gpt(80, 12288, 96)},
      {"gpt3_175b", gpt(96, 12288, 96)},
      {"gpt_310p1b", gpt(96, 16384, 128)},
      {"gpt_529p6b", gpt(105, 20480, 128)},
      {"gpt_530b", gpt(105, 20480, 128)},
      {"gpt_1008p0b", gpt(128, 25600, 160)},
      {"gpt_1t", gpt(128, 25600, 160)},
      {"mpt_7b", gpt(32, 4096, 32, 50368)},
      {"mpt_13b", gpt(40, 5120, 40, 50368)},
      {"mpt_30b", gpt(48, 7168, 56, 50368)},
      {"mpt_70b", gpt(80, 8192, 64, 50368)},
      {"llama2_7b", shape(32, 4096, 32, 32, 11008, 32000)},
      {"llama2_13b", shape(40, 5120, 40, 40, 13824, 32000)},
      {"llama2_70b", shape(80, 8192, 64, 8, 28672, 32000)},
      {"llama3_405b", shape(126, 16384, 128, 8, 53248, 128256)},
      {"tinyllama_1p1b", shape(22, 2048, 32, 4, 5632, 32000)},
      // LLaMA-2 7B and 70B layers, truncated to fit training on one GPU.
      {"llama2_7b_l4", shape(4, 4096, 32, 32, 11008, 32000)},
      {"llama2_70b_l2", shape(2, 8192, 64, 8, 28672, 32000)},
      // rlhf-bench-gpu-runtime --probe: the memory model checked on a CPU.
      {"probe_llama", shape(2, 128, 2, 2, 344, 32000)},
      {"probe_gqa", shape(2, 256, 8, 1, 688, 32000)},
  };
  auto it = models.find(name);
  if (it == models.end())
    return std::nullopt;
  return it->second;
}

int64_t num(const std::string &s) {
  int64_t v = 0;
  return StringRef(s).trim().getAsInteger(10, v) ? 0 : v;
}

struct Row {
  std::string id, category, model, hw, metric, unit, dtype;
  int64_t gpus, tp, pp, dp, batch, seqIn, seqOut;
  double value;
  std::string notes, source;
};

/// Megatron-LM (Narayanan et al. 2021, eq. 3) FLOPs per iteration,
/// including the recomputed forward pass.
double megatronFlops(const rlhf::ModelShape &m, double batch, double s) {
  double l = m.layers, h = m.hidden, V = m.vocab;
  return 96.0 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

/// Predicts a row, or says why it cannot be. `peakBytes` receives the
/// call's predicted memory per GPU (model calls only).
std::optional<double> predict(const Row &r, const Calibration &cal,
                              std::string &why, double &peakBytes) {
  peakBytes = 0;
  auto hwOpt = knownHardware(r.hw);
  if (!hwOpt) {
    why = "unknown hardware";
    return std::nullopt;
  }
  Hardware hw = *hwOpt;
  if (auto it = cal.find(r.hw); it != cal.end())
    hw.eff = it->second;
  if (r.category == "collective") {
    if (!r.gpus || !r.batch) {
      why = "group size or message size not published";
      return std::nullopt;
    }
    Link l =
        groupLink(hw, r.gpus, membersPerNode(0, r.gpus, 1, hw.gpusPerNode));
    double bytes = double(r.batch), t;
    if (r.model == "all_reduce")
      return allReduceBusBw(bytes, r.gpus, l) / 1e9;
    if (r.model == "all_to_all")
      // nccl-tests' all-to-all bus bandwidth: bytes per rank x (n-1)/n.
      return bytes * (r.gpus - 1) / r.gpus / allToAll(bytes, r.gpus, l) / 1e9;
    if (r.model == "all_gather")
      t = allGather(bytes, r.gpus, l), bytes *= double(r.gpus - 1) / r.gpus;
    else
      t = broadcast(bytes, r.gpus, l);
    return bytes / t / 1e9;
  }
  if (r.category == "attention") {
    // One FlashAttention kernel over batch x seq_in causal tokens of one
    // layer, at the model's attention rate: the FLOP count cancels.
    if (r.model != "flash_attention_2") {
      why = "FlashAttention-3 (the model prices FlashAttention-2 kernels)";
      return std::nullopt;
    }
    double flops = causalAttentionFlops(double(r.batch) * r.seqIn, r.seqIn,
                                        2048, 1);
    if (r.metric == "tflops_bwd")
      flops *= 2.5;
    else if (r.metric != "tflops_fwd") {
      why = "unsupported metric";
      return std::nullopt;
    }
    return flops / attentionTime(flops, hw) / 1e12;
  }
  auto m = modelShape(r.model);
  if (!m) {
    why = "unknown model";
    return std::nullopt;
  }
  if (r.dtype == "fp8") {
    why = "fp8 (the model prices bf16)";
    return std::nullopt;
  }
  if (!r.gpus || !r.batch) {
    why = "GPU count or batch not published";
    return std::nullopt;
  }
  Arch arch = Arch::get(*m, 1 << 20);
  int64_t tp = r.tp ? r.tp : 1, pp = r.pp ? r.pp : 1;
  if (!r.tp && !r.pp && r.dp && r.gpus / r.dp > 1) {
    // Model-parallel size only: tp inside a node, pp across.
    tp = std::min<int64_t>(8, r.gpus / r.dp);
    pp = r.gpus / r.dp / tp;
  }
  Strategy s;
  s.tp = tp;
  s.pp = pp;
  s.dp = r.gpus / (tp * pp);
  if (r.category == "inference") {
    // One forward pass over the whole batch (one micro-batch).
    CallShape c;
    c.kind = CallKind::Inference;
    c.batch = r.batch;
    c.seqLen = r.seqIn;
    Estimate e = estimateCall(arch, hw, s, c);
    double t = e.time.total();
    peakBytes = e.memory.total();
    if (r.metric == "tokens_per_sec")
      return double(r.batch) * r.seqIn / t;
    why = "unsupported metric";
    return std::nullopt;
  }
  if (r.category == "decode") {
    CallShape c;
    c.kind = CallKind::Generate;
    c.batch = r.batch;
    c.promptLen = r.seqIn;
    c.genLen = r.seqOut;
    c.greedy = true; // the benchmarks decode greedily
    s.dp = 1; // one model replica serves the whole batch
    Estimate e = estimateCall(arch, hw, s, c);
    double total = e.time.total();
    peakBytes = e.memory.total();
    if (r.metric == "tokens_per_sec_per_gpu")
      return double(r.batch) * r.seqOut / total / r.gpus;
    if (r.metric == "tokens_per_sec")
      return double(r.batch) * r.seqOut / total;
    why = "unsupported metric";
    return std::nullopt;
  }
  // Training: one optimizer step over the global batch.
  CallShape c;
  c.kind = CallKind::Train;
  c.batch = r.batch;
  c.seqLen = r.seqIn;
  c.trainable = true;
  StringRef notes(r.notes);
  bool fsdp = notes.contains("FSDP");
  s.zero = fsdp;
  s.recompute = notes.contains("INCLUDES full activation recomputation") ||
                notes.contains("activation checkpointing=True");
  // Megatron 2021 (arXiv 2104.04473) replicated norms and activations over
  // tp: sequence parallelism came a year later (arXiv 2205.05198).
  s.shardSequence = !StringRef(r.source).contains("2104.04473");
  // Pipelines run with micro-batches of one sequence (Megatron's setting).
  s.microBatches = pp > 1 ? std::max<int64_t>(1, r.batch / s.dp) : 1;
  Estimate e = estimateCall(arch, hw, s, c);
  double t = e.time.total();
  peakBytes = e.memory.total();
  if (r.metric == "tflops_per_gpu") {
    // Megatron 2021 counts the recomputed forward; Llama 3 counts model FLOPs.
    double flops = notes.contains("INCLUDES full activation recomputation")
                       ? megatronFlops(*m, double(r.batch), double(r.seqIn))
                       : e.flops;
    return flops / t / r.gpus / 1e12;
  }
  if (r.metric == "mfu")
    return 100.0 * e.flops / t / r.gpus / hw.flops;
  if (r.metric == "tokens_per_sec")
    return double(r.batch) * r.seqIn / t;
  why = "unsupported metric";
  return std::nullopt;
}

std::string setting(const Row &r) {
  std::string s = r.model + " on " + std::to_string(r.gpus) + "x" + r.hw;
  if (r.tp || r.pp)
    s += formatv(" tp{0} pp{1}", r.tp ? r.tp : 1, r.pp ? r.pp : 1).str();
  if (r.category == "collective")
    s += formatv(", {0} MiB", r.batch >> 20).str();
  else if (r.category == "attention")
    s += formatv(", {0} x {1} tokens, causal fwd / bwd", r.batch, r.seqIn)
             .str();
  else if (r.category == "decode")
    s += formatv(", batch {0}, {1}+{2} tokens", r.batch, r.seqIn, r.seqOut)
             .str();
  else
    s += formatv(", batch {0} x {1}", r.batch, r.seqIn).str();
  return s;
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(validateCat);
  cl::ParseCommandLineOptions(
      argc, argv,
      "rlhf-cost-validate: the cost model against published "
      "measurements\n");
  Calibration cal;
  if (!calibrationFile.empty()) {
    auto loaded = loadCalibration(calibrationFile);
    if (!loaded) {
      errs() << "rlhf-cost-validate: error: " << toString(loaded.takeError())
             << "\n";
      return 1;
    }
    cal = std::move(*loaded);
  }
  Regex ids(idPattern.empty() ? std::string(".*") : idPattern.getValue());
  if (std::string why; !ids.isValid(why)) {
    errs() << "rlhf-cost-validate: error: --ids: " << why << "\n";
    return 1;
  }
  auto buf = MemoryBuffer::getFile(csvPath);
  if (!buf) {
    errs() << "rlhf-cost-validate: error: cannot read " << csvPath << "\n";
    return 1;
  }
  SmallVector<StringRef> lines;
  (*buf)->getBuffer().split(lines, '\n', -1, false);
  std::string table;
  raw_string_ostream os(table);
  os << "| id | kind | setting | metric | measured | predicted | error |\n"
        "|---|---|---|---|---:|---:|---:|\n";
  std::vector<double> errors;
  std::map<std::string, std::vector<double>> byKind;
  std::vector<std::string> skipped;
  std::string predictions =
      "id,category,model,batch,seq_in,seq_out,metric,predicted,"
      "predicted_peak_bytes,hardware\n";
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = splitCsv(lines[i]);
    if (f.size() < 17) {
      errs() << "rlhf-cost-validate: error: " << csvPath << ":" << i + 1
             << ": expected 17 columns, got " << f.size() << "\n";
      return 1;
    }
    Row r{f[0],      f[1],       f[2],
          f[3],      f[12],      f[14],
          f[11],     num(f[4]),  num(f[5]),
          num(f[6]), num(f[7]),  num(f[8]),
          num(f[9]), num(f[10]), std::strtod(f[13].c_str(), nullptr),
          f[16],     f[15]};
    if (!ids.match(r.id))
      continue;
    std::string why;
    double peak = 0;
    std::optional<double> p = predict(r, cal, why, peak);
    if (!p) {
      skipped.push_back(r.id + " (" + why + ")");
      continue;
    }
    predictions += formatv("{0},{1},{2},{3},{4},{5},{6},{7:f3},{8:f0},{9}\n",
                           r.id, r.category, r.model, r.batch, r.seqIn,
                           r.seqOut, r.metric, *p, peak, r.hw)
                       .str();
    double err = (*p - r.value) / r.value * 100.0;
    errors.push_back(std::fabs(err));
    byKind[r.category].push_back(std::fabs(err));
    os << formatv("| {0} | {1} | {2} | {3} | {4} {5} | {6:f1} | {7:+f1}% |\n",
                  r.id, r.category, setting(r), r.metric, r.value, r.unit, *p,
                  err);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty())
      return 0.0;
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  os << "\n";
  for (auto &[kind, errs] : byKind)
    os << formatv("- {0}: {1} points, median abs error {2:f1}%\n", kind,
                  errs.size(), median(errs));
  if (!skipped.empty()) {
    os << formatv("- not predicted ({0}): ", skipped.size());
    for (size_t i = 0; i < skipped.size(); ++i)
      os << (i ? "; " : "") << skipped[i];
    os << "\n";
  }
  os << formatv("- predicted: {0} points\n", errors.size());
  os << formatv("\nmedian abs error: {0:f1}%\n", median(errors));
  os.flush();
  if (!predictionsFile.empty()) {
    std::ofstream out(predictionsFile);
    out << predictions;
    if (!out) {
      errs() << "rlhf-cost-validate: error: cannot write " << predictionsFile
             << "\n";
      return 1;
    }
  }

  const std::string kBegin = "<!-- " + sectionName + ":begin -->",
                    kEnd = "<!-- " + sectionName + ":end -->";
  auto section = [&](const std::string &doc, size_t &b, size_t &e) {
    b = doc.find(kBegin);
    e = doc.find(kEnd);
    return b != std::string::npos && e != std::string::npos && b < e;
  };
  if (!updateFile.empty() && !checkFile.empty()) {
    errs() << "rlhf-cost-validate: error: --update rewrites the table and "
              "--check only compares it; give one of them\n";
    return 1;
  }
  if (!updateFile.empty() || !checkFile.empty()) {
    std::string path = updateFile.empty() ? checkFile : updateFile;
    std::ifstream in(path);
    if (!in) {
      errs() << "rlhf-cost-validate: error: cannot read '" << path
             << "': " << std::strerror(errno) << "\n";
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string doc = ss.str();
    size_t b, e;
    if (!section(doc, b, e)) {
      errs() << "rlhf-cost-validate: error: " << path << " has no " << kBegin
             << " ... " << kEnd << " section\n";
      return 1;
    }
    std::string fresh = kBegin + "\n" + table + kEnd;
    std::string current = doc.substr(b, e + kEnd.size() - b);
    if (!checkFile.empty()) {
      if (current != fresh) {
        errs()
            << "rlhf-cost-validate: error: the validation table in " << path
            << " is stale; regenerate it with scripts/validate-cost-model.sh\n";
        return 1;
      }
      outs() << "validation table " << sectionName << " in " << path
             << " is current\n";
    } else {
      doc.replace(b, e + kEnd.size() - b, fresh);
      std::ofstream out(path);
      out << doc;
      out.flush();
      if (!out) {
        errs() << "rlhf-cost-validate: error: cannot write '" << path << "'\n";
        return 1;
      }
    }
  }
  if (checkFile.empty())
    outs() << table;
  if (maxMedian >= 0 && median(errors) > maxMedian) {
    errs() << formatv(
        "rlhf-cost-validate: error: median abs error {0:f1}% exceeds "
        "{1}%\n",
        median(errors), maxMedian.getValue());
    return 1;
  }
  return 0;
}
