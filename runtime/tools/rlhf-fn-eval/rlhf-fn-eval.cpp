//===- rlhf-fn-eval.cpp - run compiled functions on given tensors ---------===//
//
// Evaluates fn code (what `rlhfc --emit=fn-code` prints and executables
// embed) on tensors given as JSON, with the runtime's own evaluator: to see
// what a function computes on a few hand-made rows, and for tests that
// check functions against values computed by hand.
//
//   rlhfc prog.rlhf --emit=fn-code > prog.fn
//   rlhf-fn-eval prog.fn --fn gae inputs.json
//
// inputs.json: {"inputs": [...one nested list per input, in order...],
//               "masks": [...null or a [N, S-1] 0/1 list per input...],
//               "pad": 0,
//               "model": {"I": logits [N, S, V] or values [N, S] for the
//                         token input I, for a loss},
//               "kl_coef": the value of its adaptive_kl,
//               "entropy_coef": of its adaptive_entropy (default: their
//                          initial values)}
// Prints the outputs as one JSON object: {"advantages": [...], ...}.
//
//===----------------------------------------------------------------------===//

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

using json = nlohmann::json;
using namespace rlhf;

namespace {

const char *kUsage =
    "usage: rlhf-fn-eval CODE [--fn NAME] INPUTS.json (either may be - for "
    "stdin)\n"
    "  CODE      fn code: `rlhfc prog.rlhf --emit=fn-code` prints one "
    "program per\n"
    "            function call, separated by blank lines\n"
    "  --fn NAME the program of the function NAME (default: the only one)\n"
    "  INPUTS    {\"inputs\": [...], \"masks\": [...], \"pad\": 0, "
    "\"model\": {...},\n"
    "             \"kl_coef\": x, \"entropy_coef\": y (the values of its "
    "adaptive_kl\n"
    "             and adaptive_entropy; default their init)}\n"
    "Prints the function's outputs as JSON.\n";

/// `path`'s text; "-" is stdin.
std::string readFile(const std::string &path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("'" + path + "' is a folder, not a file");
  std::ifstream in(path);
  if (!in)
    throw Error("cannot read '" + path + "': " + std::strerror(errno));
  ss << in.rdbuf();
  return ss.str();
}

/// The program named `name` among the blank-line separated ones in `text`.
std::string pick(const std::string &text, const std::string &name) {
  std::vector<std::string> programs;
  std::string cur;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      if (!cur.empty())
        programs.push_back(cur);
      cur.clear();
      continue;
    }
    cur += (cur.empty() ? "" : "\n") + line;
  }
  if (!cur.empty())
    programs.push_back(cur);
  std::vector<std::string> names;
  for (const std::string &p : programs) {
    std::istringstream h(p);
    std::string magic, version, n;
    h >> magic >> version >> n;
    if (magic != "rlhf.fn")
      throw Error("this is not fn code (it starts '" + p.substr(0, 20) +
                  "'); print it with `rlhfc prog.rlhf --emit=fn-code`");
    names.push_back(n);
    if (!name.empty() && n == name)
      return p;
  }
  if (name.empty() && programs.size() == 1)
    return programs[0];
  std::string list;
  for (const std::string &n : names)
    list += (list.empty() ? "" : ", ") + n;
  throw Error(name.empty()
                  ? "the code holds " + std::to_string(programs.size()) +
                        " programs (" + list + "); pick one with --fn"
                  : "no program named '" + name + "' (programs: " + list + ")");
}

/// A nested JSON list as a tensor: float, or int64 for token ids. `what`
/// names it in errors.
at::Tensor tensorOf(const json &j, bool ints, const std::string &what) {
  std::vector<int64_t> shape;
  for (const json *p = &j; p->is_array(); p = &(*p)[0]) {
    shape.push_back(int64_t(p->size()));
    if (p->empty())
      break;
  }
  std::vector<double> flat;
  // Every list at a depth has that depth's length: a ragged one is no
  // tensor.
  std::function<void(const json &, size_t)> walk = [&](const json &x,
                                                       size_t depth) {
    if (depth < shape.size()) {
      if (!x.is_array() || int64_t(x.size()) != shape[depth])
        throw Error(what + " is ragged: not every list at depth " +
                    std::to_string(depth) + " has " +
                    std::to_string(shape[depth]) + " entries");
      for (const json &e : x)
        walk(e, depth + 1);
    } else if (!x.is_number() && !x.is_boolean()) {
      throw Error(what + " holds " + std::string(x.type_name()) +
                  " where a number belongs");
    } else {
      flat.push_back(x.get<double>());
    }
  };
  walk(j, 0);
  at::Tensor t = at::tensor(flat, at::kDouble).reshape(shape);
  return t.to(ints ? at::kLong : at::kFloat);
}

json jsonOf(const at::Tensor &t) {
  at::Tensor d = t.detach().to(at::kDouble).contiguous();
  if (d.dim() == 0)
    return d.item<double>();
  json out = json::array();
  for (int64_t i = 0; i < d.size(0); ++i)
    out.push_back(jsonOf(d[i]));
  return out;
}

} // namespace

int main(int argc, char **argv) {
  std::string codePath, inputsPath, name;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::cout << kUsage;
      return 0;
    }
    if (!std::strcmp(argv[i], "--fn")) {
      if (i + 1 == argc) {
        std::cerr << "rlhf-fn-eval: error: --fn needs a function's name\n";
        return 2;
      }
      name = argv[++i];
    } else if (argv[i][0] == '-' && argv[i][1]) {
      std::cerr << "rlhf-fn-eval: error: unknown option '" << argv[i] << "'\n"
                << kUsage;
      return 2;
    } else if (codePath.empty())
      codePath = argv[i];
    else if (inputsPath.empty())
      inputsPath = argv[i];
    else {
      std::cerr << "rlhf-fn-eval: error: unexpected argument '" << argv[i]
                << "'\n"
                << kUsage;
      return 2;
    }
  }
  if (codePath.empty() || inputsPath.empty()) {
    std::cerr << "rlhf-fn-eval: error: "
              << (codePath.empty() ? "no fn code and no inputs given"
                                   : "no INPUTS.json given")
              << "\n"
              << kUsage;
    return 2;
  }
  if (codePath == "-" && inputsPath == "-") {
    std::cerr << "rlhf-fn-eval: error: the code and the inputs cannot both "
                 "come from stdin\n";
    return 2;
  }
  try {
    FnProgram f = FnProgram::parse(pick(readFile(codePath), name));
    json in;
    try {
      in = json::parse(readFile(inputsPath));
    } catch (const json::parse_error &e) {
      throw Error("'" + inputsPath +
                  "' is malformed json (syntax error at byte " +
                  std::to_string(e.byte) + ")");
    }
    FnInputs x;
    x.pad = in.value("pad", 0);
    for (FnControl::Kind kind :
         {FnControl::Kind::Kl, FnControl::Kind::Entropy}) {
      const std::string key = std::string(FnControl::metric(kind)) + "_coef";
      const std::string op = FnControl::op(kind);
      if (!in.contains(key))
        continue;
      if (!in[key].is_number())
        throw Error("\"" + key +
                    "\" must be a number, the value of the "
                    "function's " +
                    op);
      if (!f.controls()[size_t(kind)])
        throw Error("'" + f.name() + "' has no " + op + " for \"" + key +
                    "\" to set");
      x.coefs[size_t(kind)] = in[key].get<double>();
    }
    const json &ins = in.at("inputs");
    if (int64_t(ins.size()) != f.numInputs())
      throw Error("'" + f.name() + "' takes " + std::to_string(f.numInputs()) +
                  " inputs, the JSON has " + std::to_string(ins.size()));
    for (int64_t i = 0; i < f.numInputs(); ++i) {
      x.tensors.push_back(tensorOf(ins[size_t(i)],
                                   f.inputKind(i) == FnKind::Tokens,
                                   "input " + std::to_string(i)));
      const json *m = in.contains("masks") && size_t(i) < in["masks"].size()
                          ? &in["masks"][size_t(i)]
                          : nullptr;
      x.masks.push_back(m && !m->is_null()
                            ? tensorOf(*m, false, "mask " + std::to_string(i))
                            : at::Tensor());
    }
    FnModel model = [&](int64_t input, const at::Tensor &) {
      std::string key = std::to_string(input);
      if (!in.contains("model") || !in["model"].contains(key))
        throw Error("the loss reads the model on input " + key +
                    "; give its logits or values as \"model\": {\"" + key +
                    "\": ...}");
      return tensorOf(in["model"][key], false, "model output " + key)
          .requires_grad_(false);
    };
    std::vector<at::Tensor> out =
        f.evaluate(x, f.mode() == FnProgram::Mode::Loss ? &model : nullptr);
    json result = json::object();
    for (size_t k = 0; k < out.size(); ++k)
      result[f.outputNames()[k]] = jsonOf(out[k]);
    std::cout << result.dump() << "\n";
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "rlhf-fn-eval: error: " << e.what() << "\n";
    return 1;
  }
}
