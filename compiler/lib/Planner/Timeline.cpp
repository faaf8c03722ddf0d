//===- Timeline.cpp - per-device timelines of a plan ----------------------===//

#include "rlhfc/Planner/Timeline.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>

using namespace rlhfc;
using namespace rlhfc::plan;
using llvm::formatv;

namespace {

const char *kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                          "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

std::string label(const Problem &p, const Event &e) {
  if (e.kind == Event::Average)
    return p.averages[e.call].label;
  const Call &c = p.calls[e.call];
  switch (e.kind) {
  case Event::Call:
  case Event::Host:
    return c.label;
  case Event::Realloc:
    return "realloc @" + p.models[c.model].name;
  case Event::Transfer:
    return "transfer to " + c.label;
  case Event::Load:
    return "load @" + p.models[c.model].name + " from host";
  case Event::Update:
    return formatv("weight update @{0} to v{1}", p.models[c.model].name,
                   e.iteration + 1)
        .str();
  case Event::Average:
    break;
  }
  return "";
}

const char *category(Event::Kind k) {
  switch (k) {
  case Event::Call:
    return "call";
  case Event::Realloc:
    return "realloc";
  case Event::Transfer:
    return "transfer";
  case Event::Load:
    return "load";
  case Event::Update:
    return "update";
  case Event::Average:
    return "ema";
  case Event::Host:
    return "host";
  }
  return "";
}

std::string escape(llvm::StringRef s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += ch;
    }
  }
  return out;
}

std::string ms(double s) { return formatv("{0:f1} ms", s * 1e3).str(); }

/// The memory savers a strategy uses, for people ("-": none).
std::string savers(const cost::Strategy &s) {
  llvm::SmallVector<llvm::StringRef> on;
  if (s.zero)
    on.push_back("ZeRO");
  if (s.recompute)
    on.push_back("recompute");
  if (s.offload)
    on.push_back("offload");
  return on.empty() ? "-" : llvm::join(on, ", ");
}

/// The GPUs that get a lane: all of them on clusters of up to 256 GPUs, where
/// an idle lane is worth seeing; above, only those the plan touches (events
/// or resident memory), so a big cluster does not turn into a huge page.
/// With `merge`, past kMergeAbove lanes, consecutive GPUs whose events and
/// memory are the same share one ("GPUs 8-4095"): a 512-node plan's page
/// held 4096 identical lanes, 74,000 pixels tall.
struct Lanes {
  std::vector<int64_t> gpus; ///< each lane's first GPU
  std::vector<int64_t> last; ///< each lane's last GPU
  std::vector<int64_t> row;  ///< per GPU, its lane (-1: none)
};
constexpr size_t kMergeAbove = 64;
Lanes lanesOf(const Problem &p, const SimResult &sim, bool merge = false) {
  constexpr int64_t kAllLanesUpTo = 256;
  std::vector<char> used(p.gpus, p.gpus <= kAllLanesUpTo);
  for (const Event &e : sim.events)
    for (int64_t g = e.firstGpu; g < e.firstGpu + e.devices; ++g)
      used[g] = 1;
  for (size_t g = 0; g < sim.peakMemory.size(); ++g)
    used[g] |= sim.peakMemory[g] > 0;
  std::vector<int64_t> shown;
  for (int64_t g = 0; g < p.gpus; ++g)
    if (used[g])
      shown.push_back(g);
  // The events on each shown GPU, to tell identical lanes.
  std::vector<std::vector<int>> on;
  merge = merge && shown.size() > kMergeAbove;
  if (merge) {
    on.resize(size_t(p.gpus));
    for (size_t i = 0; i < sim.events.size(); ++i)
      for (int64_t g = sim.events[i].firstGpu;
           g < sim.events[i].firstGpu + sim.events[i].devices; ++g)
        on[size_t(g)].push_back(int(i));
  }
  auto memoryOf = [&](int64_t g) {
    return g < int64_t(sim.memoryTrace.size())
               ? sim.memoryTrace[size_t(g)]
               : decltype(sim.memoryTrace)::value_type();
  };
  Lanes l;
  l.row.assign(p.gpus, -1);
  for (int64_t g : shown) {
    if (merge && !l.gpus.empty() && l.last.back() == g - 1 &&
        on[size_t(g)] == on[size_t(l.gpus.back())] &&
        memoryOf(g) == memoryOf(l.gpus.back())) {
      l.last.back() = g;
    } else {
      l.gpus.push_back(g);
      l.last.push_back(g);
    }
    l.row[g] = int64_t(l.gpus.size()) - 1;
  }
  return l;
}

} // namespace

void plan::writeChromeTrace(const Problem &p, const SimResult &sim,
                            llvm::StringRef title, llvm::raw_ostream &os) {
  llvm::json::Array events;
  const int64_t gpn = p.hw.gpusPerNode;
  const Lanes lanes = lanesOf(p, sim);
  for (size_t i = 0; i < lanes.gpus.size(); ++i)
    if (int64_t n = lanes.gpus[i] / gpn; i == 0 || lanes.gpus[i - 1] / gpn != n)
      events.push_back(llvm::json::Object{
          {"ph", "M"},
          {"name", "process_name"},
          {"pid", n},
          {"args",
           llvm::json::Object{{"name", formatv("node {0}", n).str()}}}});
  for (int64_t g : lanes.gpus)
    events.push_back(llvm::json::Object{
        {"ph", "M"},
        {"name", "thread_name"},
        {"pid", g / gpn},
        {"tid", g},
        {"args", llvm::json::Object{{"name", formatv("GPU {0}", g).str()}}}});
  // Host functions run on the controller: a lane of their own, after the
  // GPUs, so the calls on the critical path add up to the iteration.
  const int64_t controller = p.gpus;
  if (llvm::any_of(sim.events,
                   [](const Event &e) { return e.kind == Event::Host; }))
    events.push_back(llvm::json::Object{
        {"ph", "M"},
        {"name", "thread_name"},
        {"pid", 0},
        {"tid", controller},
        {"args", llvm::json::Object{{"name", "controller (host functions)"}}}});
  for (const Event &e : sim.events)
    if (e.kind == Event::Host)
      events.push_back(llvm::json::Object{
          {"ph", "X"},
          {"name", label(p, e)},
          {"cat", category(e.kind)},
          {"pid", 0},
          {"tid", controller},
          {"ts", e.start * 1e6},
          {"dur", std::max(0.0, e.end - e.start) * 1e6},
          {"args", llvm::json::Object{{"iteration", e.iteration}}}});
  for (const Event &e : sim.events)
    for (int64_t g = e.firstGpu; g < e.firstGpu + e.devices; ++g) {
      llvm::json::Object args{{"iteration", e.iteration}};
      if (e.bytes > 0)
        args["bytes"] = e.bytes;
      events.push_back(
          llvm::json::Object{{"ph", "X"},
                             {"name", label(p, e)},
                             {"cat", category(e.kind)},
                             {"pid", g / gpn},
                             {"tid", g},
                             {"ts", e.start * 1e6},
                             {"dur", std::max(0.0, e.end - e.start) * 1e6},
                             {"args", std::move(args)}});
    }
  for (int64_t g : lanes.gpus) {
    if (g >= int64_t(sim.memoryTrace.size()))
      break;
    for (auto [t, bytes] : sim.memoryTrace[g])
      events.push_back(llvm::json::Object{
          {"ph", "C"},
          {"name", formatv("memory GPU {0} (GB)", g).str()},
          {"pid", g / gpn},
          {"ts", t * 1e6},
          {"args", llvm::json::Object{{"GB", bytes / 1e9}}}});
  }
  llvm::json::Object root{
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       llvm::json::Object{{"title", title.str()},
                          {"predicted_iteration_time_s", sim.iterationTime}}}};
  os << llvm::json::Value(std::move(root)) << "\n";
}

void plan::writeTimelineHtml(const Problem &p, const SimResult &sim,
                             llvm::StringRef title, llvm::raw_ostream &os) {
  const Lanes lanes = lanesOf(p, sim, /*merge=*/true);
  const int64_t gpn = p.hw.gpusPerNode;
  std::vector<std::string> laneNames;
  int64_t shown = 0;
  size_t widest = 0;
  for (size_t i = 0; i < lanes.gpus.size(); ++i) {
    const int64_t g = lanes.gpus[i], h = lanes.last[i];
    laneNames.push_back(
        g == h ? formatv("GPU {0} (n{1})", g, g / gpn).str()
        : g / gpn == h / gpn
            ? formatv("GPUs {0}-{1} (n{2})", g, h, g / gpn).str()
            : formatv("GPUs {0}-{1} (n{2}-n{3})", g, h, g / gpn, h / gpn)
                  .str());
    shown += h - g + 1;
    widest = std::max(widest, laneNames.back().size());
  }
  // About 6 pixels per character of the lanes' 10px labels.
  const double W = 1100, laneH = 18, top = 30,
               left = std::max(70.0, 6.0 * double(widest) + 8);
  const double span = std::max(sim.makespan, 1e-9);
  auto x = [&](double t) { return left + (W - left - 10) * t / span; };
  const double ganttH = top + laneH * double(lanes.gpus.size()) + 30;

  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
     << "<title>" << escape(title) << " — rlhfc timeline</title>\n"
     << "<style>"
        "body{font:13px system-ui,sans-serif;margin:20px;color:#222}"
        "h1{font-size:18px}"
        "svg{background:#fafafa;border:1px solid #ddd}"
        ".call{stroke:#333;stroke-width:.3}"
        ".realloc{fill:url(#hatch);stroke:#222;stroke-width:.5}"
        ".transfer{fill:#222;opacity:.6}"
        ".load{fill:#8cd;stroke:#268;stroke-width:.5}"
        ".update{fill:#c6c;stroke:#636;stroke-width:.5}"
        ".ema{fill:#eb5;stroke:#850;stroke-width:.5}"
        ".lane{font-size:10px}"
        "table{border-collapse:collapse;margin-top:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}"
        ".legend span{display:inline-block;margin-right:14px}"
        ".legend i{display:inline-block;width:12px;height:12px;"
        "margin-right:4px;vertical-align:middle}"
        "</style></head><body>\n";
  os << "<h1>" << escape(title) << "</h1>\n";
  os << formatv("<p id=\"summary\">{0} x {1} {2}; predicted iteration time "
                "<b id=\"iteration-time\">{3}</b> (steady state over the {4} "
                "simulated iterations shown).</p>\n",
                p.nodes, p.hw.gpusPerNode, escape(p.hw.name),
                ms(sim.iterationTime),
                sim.events.empty()
                    ? 0
                    : 1 + std::max_element(sim.events.begin(), sim.events.end(),
                                           [](const Event &x, const Event &y) {
                                             return x.iteration < y.iteration;
                                           })
                              ->iteration);
  if (p.staleness > 0)
    os << formatv("<p id=\"async\">Staleness {0}: generation runs up to {0} "
                  "iteration(s) ahead of training, so calls of different "
                  "iterations overlap; weight updates copy each new version "
                  "into the generator's layout.</p>\n",
                  p.staleness);
  if (int64_t hidden = p.gpus - shown)
    os << formatv(
        "<p id=\"hidden-lanes\">{0} of the {1} GPUs run nothing in "
        "this plan and hold no memory; their lanes are left out.</p>\n",
        hidden, p.gpus);
  os << "<div class=\"legend\" id=\"legend\"></div>\n";

  // Gantt chart: one lane per GPU shown.
  os << formatv("<svg id=\"gantt\" width=\"{0}\" height=\"{1}\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                W, ganttH);
  os << "<defs><pattern id=\"hatch\" width=\"4\" height=\"4\" "
        "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
        "<rect width=\"2\" height=\"4\" fill=\"#555\"/></pattern></defs>\n";
  for (size_t i = 0; i < lanes.gpus.size(); ++i) {
    double y = top + double(i) * laneH;
    const std::string &name = laneNames[i];
    os << formatv(
        "<text class=\"lane\" x=\"4\" y=\"{0}\">{1}</text>"
        "<line x1=\"{2}\" x2=\"{3}\" y1=\"{4}\" y2=\"{4}\" stroke=\"#eee\"/>\n",
        y + 12, name, left, W - 10, y + laneH);
  }
  for (const Event &e : sim.events) {
    std::string name = escape(label(p, e));
    const char *cls = category(e.kind);
    std::string fill = e.kind == Event::Call
                           ? kPalette[p.calls[e.call].model %
                                      (sizeof(kPalette) / sizeof(*kPalette))]
                           : "";
    for (int64_t g = e.firstGpu; g < e.firstGpu + e.devices; ++g) {
      if (lanes.gpus[size_t(lanes.row[g])] != g)
        continue; // drawn on its lane's first GPU
      double y = top + double(lanes.row[g]) * laneH +
                 (e.kind == Event::Transfer ? laneH * 0.7 : 1);
      double h = e.kind == Event::Transfer ? laneH * 0.25 : laneH - 2;
      os << formatv(
          "<rect class=\"{0}\" data-gpu=\"{1}\" data-name=\"{2}\" "
          "data-iteration=\"{3}\" x=\"{4:f2}\" y=\"{5:f2}\" width=\"{6:f2}\" "
          "height=\"{7:f2}\"{8}><title>{2}, iteration {3}: {9} to {10} "
          "(GPUs {11}-{12})</title></rect>\n",
          cls, g, name, e.iteration, x(e.start), y,
          std::max(0.5, x(e.end) - x(e.start)), h,
          fill.empty() ? "" : " fill=\"" + fill + "\"", ms(e.start), ms(e.end),
          e.firstGpu, e.firstGpu + e.devices - 1);
    }
  }
  for (int i = 0; i <= 10; ++i) {
    double t = span * i / 10;
    // Centred on their tick; the first starts there and the last ends
    // there, so none runs past the chart or into its neighbour.
    os << formatv("<text class=\"lane\" x=\"{0:f1}\" y=\"{1}\"{3}>{2}</text>\n",
                  x(t), ganttH - 8, ms(t),
                  i == 0    ? ""
                  : i == 10 ? " text-anchor=\"end\""
                            : " text-anchor=\"middle\"");
  }
  os << "</svg>\n";

  // Memory over time: one polyline per GPU against the usable limit.
  const double memH = 220, mTop = 10, mBottom = memH - 25;
  double peak = 0;
  for (double b : sim.peakMemory)
    peak = std::max(peak, b);
  // Peaks far below the limit (a tiny model's megabytes) would lie flat
  // along zero: the chart then scales to them and says where the limit is.
  const bool zoomed = peak > 0 && peak < 0.05 * p.memoryLimit;
  const double maxMem = zoomed ? 1.25 * peak : std::max(peak, p.memoryLimit);
  auto amount = [](double bytes) {
    return bytes >= 1e9 ? formatv("{0:f1} GB", bytes / 1e9).str()
                        : formatv("{0:f0} MB", bytes / 1e6).str();
  };
  auto y = [&](double b) { return mBottom - (mBottom - mTop) * b / maxMem; };
  os << "<h2 style=\"font-size:15px\">Predicted memory per GPU</h2>\n";
  os << formatv("<svg id=\"memory\" width=\"{0}\" height=\"{1}\" "
                "xmlns=\"http://www.w3.org/2000/svg\">\n",
                W, memH);
  if (zoomed)
    os << formatv("<text class=\"lane\" x=\"{0}\" y=\"{1}\">usable {2:f1} "
                  "GB, far above this chart's scale</text>\n",
                  left, mTop + 8, p.memoryLimit / 1e9);
  else
    os << formatv(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:f1}\" y2=\"{2:f1}\" "
        "stroke=\"#d33\" stroke-dasharray=\"4\"/><text class=\"lane\" "
        "x=\"{0}\" y=\"{3:f1}\">usable {4:f1} GB</text>\n",
        left, W - 10, y(p.memoryLimit), y(p.memoryLimit) - 3,
        p.memoryLimit / 1e9);
  for (int64_t g : lanes.gpus) {
    if (g >= int64_t(sim.memoryTrace.size()))
      break;
    std::string pts;
    double last = 0;
    for (auto [t, b] : sim.memoryTrace[g]) {
      pts += formatv("{0:f1},{1:f1} {0:f1},{2:f1} ", x(t), y(last), y(b)).str();
      last = b;
    }
    pts += formatv("{0:f1},{1:f1}", x(span), y(last)).str();
    os << formatv("<polyline class=\"mem\" data-gpu=\"{0}\" fill=\"none\" "
                  "stroke=\"{1}\" stroke-width=\"1\" points=\"{2}\">"
                  "<title>{4}: peak {3}</title></polyline>\n",
                  g, kPalette[g % 8], pts, amount(sim.peakMemory[g]),
                  laneNames[size_t(lanes.row[g])]);
  }
  os << formatv("<text class=\"lane\" x=\"4\" y=\"{0}\">{1}</text>"
                "<text class=\"lane\" x=\"4\" y=\"{2}\">0</text>\n",
                mTop + 8, amount(maxMem), mBottom);
  os << "</svg>\n";

  // The calls, as a table.
  os << "<table "
        "id=\"calls\"><tr><th>call</th><th>GPUs</th><th>dp</th><th>tp</th>"
        "<th>pp</th><th>micro-batches</th><th>memory savers</th><th>time</th>"
        "<th>memory/GPU</th></tr>\n";
  for (size_t c = 0; c < p.calls.size(); ++c) {
    const Call &call = p.calls[c];
    if (call.host) {
      os << formatv("<tr class=\"host\"><td>{0}</td><td>controller</td>"
                    "<td colspan=\"5\">a host function</td><td>{1}</td>"
                    "<td></td></tr>\n",
                    escape(call.label), ms(call.hostTime));
      continue;
    }
    const Candidate &k = p.cands[c][0];
    os << formatv(
        "<tr><td>{0}</td><td>{1}-{2}</td><td>{3}</td><td>{4}</td><td>{5}</td>"
        "<td>{6}</td><td>{7}</td><td>{8}</td><td>{9}</td></tr>\n",
        escape(call.label), k.s.firstGpu, k.s.firstGpu + k.devices - 1, k.s.dp,
        k.s.tp, k.s.pp, k.s.microBatches, savers(k.s), ms(k.time),
        amount(k.mem.total()));
  }
  // Each ema's time in the first iteration, the move of the source's
  // weights included, over the GPUs of both layouts.
  for (size_t i = 0; i < p.averages.size(); ++i) {
    std::string gpus;
    double time = 0;
    for (const Event &e : sim.events)
      if (e.kind == Event::Average && e.call == int(i) && e.iteration == 0) {
        gpus += formatv("{0}{1}-{2}", gpus.empty() ? "" : ", ", e.firstGpu,
                        e.firstGpu + e.devices - 1);
        time = e.end - e.start;
      }
    if (!gpus.empty())
      os << formatv("<tr class=\"ema\"><td>{0}</td><td>{1}</td>"
                    "<td colspan=\"5\">the source's weights moved into the "
                    "target's layout and blended there</td><td>{2}</td>"
                    "<td></td></tr>\n",
                    escape(p.averages[i].label), gpus, ms(time));
  }
  os << "</table>\n";

  // The legend is built in the browser from the chart itself, so a test can
  // tell that the page's script ran.
  os << "<script>\n(function(){\n"
        "  const seen = new Map();\n"
        "  document.querySelectorAll('#gantt rect.call').forEach(r => {\n"
        "    const model = r.dataset.name.split('@')[1];\n"
        "    if (!seen.has(model)) seen.set(model, r.getAttribute('fill'));\n"
        "  });\n"
        "  const legend = document.getElementById('legend');\n"
        "  for (const [model, color] of seen) {\n"
        "    const s = document.createElement('span');\n"
        "    s.className = 'model';\n"
        "    s.innerHTML =\n"
        "        '<i style=\"background:' + color + '\"></i>@' + model;\n"
        "    legend.appendChild(s);\n"
        "  }\n"
        "  const r = document.createElement('span');\n"
        "  r.innerHTML = '<i style=\"background:#555\"></i>reallocation';\n"
        "  legend.appendChild(r);\n"
        "  if (document.querySelector('#gantt rect.update')) {\n"
        "    const u = document.createElement('span');\n"
        "    u.innerHTML = '<i style=\"background:#c6c\"></i>weight update';\n"
        "    legend.appendChild(u);\n"
        "  }\n"
        "  if (document.querySelector('#gantt rect.ema')) {\n"
        "    const e = document.createElement('span');\n"
        "    e.innerHTML = '<i style=\"background:#eb5\"></i>ema';\n"
        "    legend.appendChild(e);\n"
        "  }\n"
        "  if (document.querySelector('#gantt rect.load')) {\n"
        "    const l = document.createElement('span');\n"
        "    l.innerHTML = '<i style=\"background:#8cd\"></i>load from host';\n"
        "    legend.appendChild(l);\n"
        "  }\n"
        "  document.body.dataset.rendered = 'true';\n"
        "  document.body.dataset.lanes =\n"
        "      document.querySelectorAll('#gantt text.lane').length;\n"
        "})();\n</script>\n</body></html>\n";
}
