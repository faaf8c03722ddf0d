//===- StdlibFns.h - the stdlib's functions as fn code, for tests *- C++
//-*-===//
//
// test/unit/Inputs/stdlib.fn holds the fn code rlhfc compiles from the
// stdlib's .rlhf functions for the calls of stdlib-calls.rlhf (kept current
// by test/Runtime/stdlib-fn-golden.test). Runtime tests and workers train
// with these losses, as compiled programs do.
//
//===----------------------------------------------------------------------===//

#ifndef RLHF_TEST_UNIT_STDLIBFNS_H
#define RLHF_TEST_UNIT_STDLIBFNS_H

#include "rlhf/runtime/Error.h"
#include "rlhf/runtime/FnProgram.h"

#include <fstream>
#include <sstream>
#include <string>

namespace rlhf::testfns {

/// The `k`-th program named `name` in test/unit/Inputs/stdlib.fn: the fn
/// code rlhfc compiles from the stdlib's .rlhf functions for the calls of
/// stdlib-calls.rlhf.
inline std::string stdlibProgram(const std::string &name, int k = 0) {
  std::ifstream in(RLHF_UNIT_INPUTS "/stdlib.fn");
  if (!in)
    throw Error("cannot read " RLHF_UNIT_INPUTS "/stdlib.fn");
  std::string cur;
  int seen = 0;
  auto take = [&]() -> bool {
    std::istringstream h(cur);
    std::string magic, version, n;
    h >> magic >> version >> n;
    return n == name && seen++ == k;
  };
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      cur += (cur.empty() ? "" : "\n") + line;
      continue;
    }
    if (!cur.empty() && take())
      return cur;
    cur.clear();
  }
  if (!cur.empty() && take())
    return cur;
  throw Error("no program " + std::to_string(k) + " named '" + name +
              "' in stdlib.fn");
}

/// The same, parsed.
inline FnProgram stdlibFn(const std::string &name, int k = 0) {
  return FnProgram::parse(stdlibProgram(name, k));
}

} // namespace rlhf::testfns

#endif // RLHF_TEST_UNIT_STDLIBFNS_H
