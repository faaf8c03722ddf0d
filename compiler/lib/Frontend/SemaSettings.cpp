//===- SemaSettings.cpp - the named settings of calls ---------------------===//
//
// `name = value` settings of model methods and built-ins, checked against
// the callee's table (Builtins.h): numbers with ranges and integers, and
// strings where a setting takes text (script_reward's command).
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

using namespace rlhfc;
using namespace rlhfc::sema;
using namespace rlhfc::sema::detail;

bool Sema::readSettings(const Expr &call, llvm::ArrayRef<SettingSpec> specs,
                        size_t firstSetting, llvm::StringMap<Local> &env,
                        Node &n, StringRef callee) {
  bool ok = true;
  std::set<std::string> given;
  for (size_t i = firstSetting; i < call.args.size(); ++i) {
    const Arg &a = call.args[i];
    if (a.name.empty())
      continue;
    auto spec = llvm::find_if(
        specs, [&](const SettingSpec &s) { return a.name == s.name; });
    if (spec == specs.end())
      continue; // named tensor argument, handled by the caller
    if (!given.insert(a.name).second) {
      error(a.loc, "'" + a.name + "' is given twice");
      ok = false;
      continue;
    }
    if (spec->text || a.value->kind == Expr::Kind::String) {
      ok &= readTextSetting(a, *spec, env, n, callee);
      continue;
    }
    auto v = evalValue(*a.value, env);
    if (!v)
      return false;
    if (v->kind != Value::Number) {
      error(a.value->loc, formatv("'{0}' of {1} is a number, not {2}", a.name,
                                  callee, describe(*v)));
      ok = false;
      continue;
    }
    if (v->dim != UnitDim::None) {
      error(a.value->loc, formatv("'{0}' of {1} is a plain number, not {2}",
                                  a.name, callee, unitDimName(v->dim)));
      ok = false;
      continue;
    }
    if (spec->integer && !v->isInteger) {
      error(a.value->loc,
            formatv("'{0}' of {1} must be an integer", a.name, callee));
      ok = false;
      continue;
    }
    if (v->number < spec->min || v->number > spec->max) {
      error(a.value->loc,
            formatv("'{0}' of {1} must be between {2} and {3}, got {4}", a.name,
                    callee, formatNumber(spec->min), formatNumber(spec->max),
                    formatNumber(v->number)));
      ok = false;
      continue;
    }
    n.attrs.emplace_back(a.name, v->number);
  }
  for (const SettingSpec &s : specs) {
    if (given.count(s.name) || s.optional)
      continue;
    if (s.required) {
      error(call.loc, formatv("{0} needs '{1} = {2}'", callee, s.name,
                              s.text ? "\"...\"" : "..."));
      ok = false;
      continue;
    }
    n.attrs.emplace_back(s.name, s.fallback);
  }
  return ok;
}

bool Sema::readTextSetting(const Arg &a, const SettingSpec &spec,
                           llvm::StringMap<Local> &env, Node &n,
                           StringRef callee) {
  const Expr &e = *a.value;
  if (!spec.text) { // a string where a number is needed
    double x = 0;
    bool numeric = !e.text.empty() && !StringRef(e.text).getAsDouble(x);
    error(e.loc,
          formatv("'{0}' of {1} is a number, not a string{2}", a.name, callee,
                  numeric ? "; write it without quotes: '" + a.name + " = " +
                                e.text + "'"
                          : std::string()));
    return false;
  }
  if (e.kind != Expr::Kind::String) {
    std::string what = "a number";
    if (e.kind == Expr::Kind::Bool)
      what = "'true' or 'false'";
    else if (e.kind == Expr::Kind::List)
      what = "a list";
    else if (e.kind == Expr::Kind::Call)
      what = "a call";
    else if (e.kind == Expr::Kind::Name || e.kind == Expr::Kind::Field) {
      auto v = evalValue(e, env);
      if (!v)
        return false;
      what = describe(*v);
    }
    error(e.loc, formatv("'{0}' of {1} is a string in double quotes, not "
                         "{2}; write '{0} = \"...\"'",
                         a.name, callee, what));
    return false;
  }
  if (e.text.empty()) {
    error(e.loc, formatv("'{0}' of {1} is empty; give {2}", a.name, callee,
                         spec.help));
    return false;
  }
  n.textAttrs.emplace_back(a.name, e.text);
  return true;
}
