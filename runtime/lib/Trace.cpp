//===- Trace.cpp - the measured timeline of a run -------------------------===//

#include "rlhf/runtime/Trace.h"
#include "rlhf/runtime/Error.h"

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace rlhf;

MeasuredTrace::MeasuredTrace(std::string path, const Communicator &world,
                             const std::string &program,
                             double predictedIteration)
    : path(std::move(path)), epoch(Clock::now()) {
  if (world.rank() != 0)
    return;
  nlohmann::json other = {{"title", program + " (measured by rlhf-run)"},
                          {"predicted_iteration_time_s", predictedIteration}};
  closing =
      "],\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + "}\n";
  file.open(this->path, std::ios::out | std::ios::trunc);
  if (!file)
    throw Error("cannot write the trace to '" + this->path + "'");
  file << "{\"traceEvents\":[";
  std::vector<nlohmann::json> meta;
  meta.push_back({{"ph", "M"},
                  {"name", "process_name"},
                  {"pid", 0},
                  {"args", {{"name", "workers (measured)"}}}});
  for (int r = 0; r < world.size(); ++r)
    meta.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", 0},
                    {"tid", r},
                    {"args", {{"name", "rank " + std::to_string(r)}}}});
  append(meta);
}

void MeasuredTrace::append(const std::vector<nlohmann::json> &events) {
  // Overwrite the closing brackets with the new events, then put them back:
  // the file only grows, so nothing of the old closing is left over.
  bool first = tail == std::streampos(0);
  if (!first)
    file.seekp(tail);
  for (const nlohmann::json &e : events) {
    if (!first)
      file << ",";
    file << e.dump();
    first = false;
  }
  tail = file.tellp();
  file << closing;
  file.flush();
  if (!file)
    throw Error("cannot write the trace to '" + path + "'");
}

namespace {

/// Resident set size of this process now (0 where /proc is missing).
double residentBytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(statm >> pages >> resident))
    return 0;
  return resident * double(sysconf(_SC_PAGESIZE));
}

/// The plan's name (`rlhfc --emit=trace`) of what the runtime times as
/// `label` (its metric's name, "time/LABEL"), so that the two timelines
/// name the same call alike.
std::string planName(const std::string &label, const char *cat) {
  auto after = [&](const char *prefix) -> const char * {
    size_t n = std::strlen(prefix);
    return label.compare(0, n, prefix) == 0 ? label.c_str() + n : nullptr;
  };
  const std::string c = cat;
  if (c == "host")
    return "compute " + label;
  if (c == "load")
    if (const char *m = after("onload "))
      return std::string("load @") + m + " from host";
  for (const char *op : {"generate ", "inference ", "realloc ",
                         "weight update ", "first weight copy "})
    if (const char *m = after(op))
      return std::string(op) + "@" + m;
  if (const char *m = after("train "))
    return std::string("train_step @") + m;
  return label;
}

} // namespace

void MeasuredTrace::add(const std::string &name, const char *cat,
                        Clock::time_point start, Clock::time_point end,
                        int64_t step, double peakBytes) {
  auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - epoch).count();
  };
  pending.push_back({planName(name, cat), cat, us(start), us(end) - us(start),
                     step, peakBytes, residentBytes()});
}

void MeasuredTrace::flush(Communicator &world) {
  // Variable-length payloads through a fixed-shape all-gather: lengths
  // first, then every rank's bytes padded to the longest.
  std::string mine = pending.dump();
  pending = nlohmann::json::array();
  at::Tensor len = at::full({1, 1}, int64_t(mine.size()), at::kLong);
  at::Tensor lens = world.allGather(len);
  int64_t longest = lens.max().item<int64_t>();
  at::Tensor buf = at::zeros({1, longest}, at::kByte);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  at::Tensor all = world.allGather(buf).contiguous();
  if (world.rank() != 0)
    return;
  std::vector<nlohmann::json> events;
  for (int r = 0; r < world.size(); ++r) {
    const char *bytes = reinterpret_cast<const char *>(all[r].data_ptr());
    auto spans = nlohmann::json::parse(
        std::string(bytes, size_t(lens[r][0].item<int64_t>())), nullptr, false);
    if (spans.is_discarded())
      throw Error("trace: rank " + std::to_string(r) +
                  " sent spans that do not parse");
    const std::string counter = "memory rank " + std::to_string(r) + " (GB)";
    for (const auto &s : spans) {
      events.push_back({{"ph", "X"},
                        {"name", s[0]},
                        {"cat", s[1]},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", s[2]},
                        {"dur", s[3]},
                        {"args",
                         {{"step", s[4]},
                          {"peak GB", s[5].get<double>() / 1e9},
                          {"rss GB", s[6].get<double>() / 1e9}}}});
      // The span's peak, drawn from its start to its end.
      for (double at :
           {s[2].get<double>(), s[2].get<double>() + s[3].get<double>()})
        events.push_back({{"ph", "C"},
                          {"name", counter},
                          {"pid", 0},
                          {"ts", at},
                          {"args", {{"GB", s[5].get<double>() / 1e9}}}});
    }
  }
  append(events);
}
