//===- Slurm.cpp - launch settings from a Slurm job step ------------------===//

#include "Slurm.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

using namespace llvm;

namespace {

Error malformed(StringRef list, const Twine &why) {
  return createStringError(inconvertibleErrorCode(),
                           "'" + list + "' is not a Slurm host list: " + why);
}

bool allDigits(StringRef s) {
  return !s.empty() && all_of(s, [](char c) { return isDigit(c); });
}

std::optional<StringRef> env(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return std::nullopt;
  return StringRef(v);
}

Expected<unsigned> envNumber(const char *name, unsigned lo) {
  std::optional<StringRef> v = env(name);
  if (!v)
    return createStringError(inconvertibleErrorCode(),
                             formatv("Slurm step without {0}", name));
  unsigned x = 0;
  if (v->getAsInteger(10, x) || x < lo)
    return createStringError(
        inconvertibleErrorCode(),
        formatv("{0}='{1}' is not an integer >= {2}", name, *v, lo));
  return x;
}

/// The first variable of `names` that is set, as (name, value).
std::optional<std::pair<const char *, StringRef>>
firstEnv(std::initializer_list<const char *> names) {
  for (const char *n : names)
    if (std::optional<StringRef> v = env(n))
      return std::make_pair(n, *v);
  return std::nullopt;
}

} // namespace

Expected<std::string> rlhfrun::firstSlurmHost(StringRef list) {
  StringRef s = list.trim();
  if (s.empty())
    return malformed(list, "it is empty");
  // Brackets never nest; check the whole list, then expand the first host.
  bool open = false;
  for (char c : s) {
    if (c == '[' && open)
      return malformed(list, "nested '['");
    if (c == ']' && !open)
      return malformed(list, "']' without '['");
    if (c == '[' || c == ']')
      open = c == '[';
  }
  if (open)
    return malformed(list, "'[' without ']'");

  std::string host;
  for (size_t i = 0; i < s.size() && s[i] != ','; ++i) {
    if (s[i] != '[') {
      host += s[i];
      continue;
    }
    size_t close = s.find(']', i);
    StringRef body = s.slice(i + 1, close);
    // The first element of the first range is the first host; its digits
    // as written keep the padding ("[007-010]" -> 007).
    StringRef first = body.split(',').first;
    auto [lo, hi] = first.split('-');
    unsigned long long l = 0, h = 0;
    bool bad = !allDigits(lo) || lo.getAsInteger(10, l);
    if (!bad && first.contains('-'))
      bad = !allDigits(hi) || hi.getAsInteger(10, h) || h < l;
    if (bad)
      return malformed(list, "'[" + body +
                                 "]' is not a list of numbers and ranges "
                                 "like [01-04,07]");
    host += lo.str();
    i = close;
  }
  if (host.empty())
    return malformed(list, "the first host is empty");
  return host;
}

Expected<std::optional<rlhfrun::SlurmStep>> rlhfrun::readSlurmStep() {
  // srun sets the STEP_ variables; a batch script has SLURM_PROCID too, but
  // runs on the first node only.
  std::optional<StringRef> nodeList = env("SLURM_STEP_NODELIST");
  if (!nodeList)
    return std::nullopt;
  auto nodes = firstEnv({"SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  auto tasks = firstEnv({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  if (!nodes || !tasks)
    return createStringError(inconvertibleErrorCode(),
                             "Slurm step without SLURM_STEP_NUM_NODES or "
                             "SLURM_STEP_NUM_TASKS");
  Expected<unsigned> nnodes = envNumber(nodes->first, 1);
  if (!nnodes)
    return nnodes.takeError();
  Expected<unsigned> ntasks = envNumber(tasks->first, 1);
  if (!ntasks)
    return ntasks.takeError();
  if (*ntasks != *nnodes)
    return createStringError(
        inconvertibleErrorCode(),
        formatv("this Slurm step runs {0} tasks on {1} node{2}; rlhf-run "
                "starts a node's workers itself, so run one per node "
                "(srun --ntasks-per-node=1 rlhf-run -n GPUS ...), or pass "
                "--nnodes to ignore Slurm",
                *ntasks, *nnodes, *nnodes == 1 ? "" : "s"));
  Expected<unsigned> nodeId = envNumber("SLURM_NODEID", 0);
  if (!nodeId)
    return nodeId.takeError();
  if (*nodeId >= *nnodes)
    return createStringError(inconvertibleErrorCode(),
                             formatv("SLURM_NODEID={0} is not below {1}={2}",
                                     *nodeId, nodes->first, *nnodes));
  Expected<std::string> master = firstSlurmHost(*nodeList);
  if (!master)
    return createStringError(inconvertibleErrorCode(),
                             "SLURM_STEP_NODELIST=" +
                                 toString(master.takeError()));

  SlurmStep step;
  step.nnodes = *nnodes;
  step.nodeRank = *nodeId;
  step.masterAddr = *master;
  if (std::optional<StringRef> p = env("MASTER_PORT")) {
    if (p->getAsInteger(10, step.masterPort) || step.masterPort == 0 ||
        step.masterPort > 65534)
      return createStringError(inconvertibleErrorCode(),
                               "MASTER_PORT='" + *p +
                                   "' is not a port in 1..65534");
    step.portFrom = "MASTER_PORT";
  } else if (std::optional<StringRef> job = env("SLURM_JOB_ID")) {
    // Every node derives the same port; even ports in 12000..31998 leave
    // the next one to the launchers and stay below Linux's ephemeral range
    // (32768+), where the kernel hands out ports to other connections.
    unsigned long long id = 0, stepId = 0;
    if (!job->getAsInteger(10, id)) {
      if (std::optional<StringRef> s = env("SLURM_STEP_ID"))
        (void)s->getAsInteger(10, stepId);
      step.masterPort = 12000 + unsigned((id * 16 + stepId % 16) % 10000) * 2;
      step.portFrom = "SLURM_JOB_ID";
    }
  }
  step.summary =
      formatv("node {0} of {1} (SLURM_NODEID, {2}), master {3} (first host "
              "of SLURM_STEP_NODELIST)",
              step.nodeRank, step.nnodes, nodes->first, step.masterAddr)
          .str();
  return step;
}
