//===- RuntimeEmitter.h - LLVM dialect calls and constants ------*- C++ -*-===//
//
// What rlhf-lower-to-runtime builds with: calls into rlhf_program.h,
// constant strings and int64 arrays as globals, and the encodings of a
// call's layout and settings that the runtime reads back.
//
//===----------------------------------------------------------------------===//

#ifndef RLHFC_TRANSFORMS_RUNTIMEEMITTER_H
#define RLHFC_TRANSFORMS_RUNTIMEEMITTER_H

#include "rlhf/IR/RLHFOps.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdio>
#include <map>
#include <string>

namespace rlhfc::lowering {

namespace LLVM = mlir::LLVM;
namespace r = mlir::rlhf;
using mlir::ArrayRef;
using mlir::Attribute;
using mlir::Block;
using mlir::cast;
using mlir::DictionaryAttr;
using mlir::dyn_cast;
using mlir::FloatAttr;
using mlir::IntegerAttr;
using mlir::isa;
using mlir::Location;
using mlir::ModuleOp;
using mlir::NamedAttribute;
using mlir::OpBuilder;
using mlir::SmallVector;
using mlir::StringAttr;
using mlir::StringRef;
using mlir::Type;
using mlir::TypedAttr;
using mlir::Value;
using mlir::ValueRange;

/// Emits runtime calls and constant globals into one module.
class Emitter {
public:
  Emitter(ModuleOp module) : module(module), b(module.getContext()) {
    ptr = LLVM::LLVMPointerType::get(module.getContext());
    i64 = b.getI64Type();
    i32 = b.getI32Type();
    f64 = b.getF64Type();
    voidTy = LLVM::LLVMVoidType::get(module.getContext());
  }

  /// Declares `name` once with the given signature.
  LLVM::LLVMFuncOp declare(StringRef name, Type result, ArrayRef<Type> args) {
    if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToEnd(module.getBody());
    return b.create<LLVM::LLVMFuncOp>(
        module.getLoc(), name, LLVM::LLVMFunctionType::get(result, args));
  }

  Value call(Location loc, StringRef name, Type result, ValueRange args) {
    SmallVector<Type> types(args.getTypes());
    auto f = declare(name, result, types);
    auto c = b.create<LLVM::CallOp>(loc, f, args);
    return isa<LLVM::LLVMVoidType>(result) ? Value() : c.getResult();
  }

  Value int64(Location loc, int64_t v) {
    return b.create<LLVM::ConstantOp>(loc, i64, b.getI64IntegerAttr(v));
  }
  Value float64(Location loc, double v) {
    return b.create<LLVM::ConstantOp>(loc, f64, b.getF64FloatAttr(v));
  }
  Value null(Location loc) { return b.create<LLVM::ZeroOp>(loc, ptr); }

  /// Address of a NUL-terminated constant string (one global per text).
  Value string(Location loc, StringRef text) {
    std::string &sym = strings[text.str()];
    if (sym.empty()) {
      sym = llvm::formatv("__rlhf_str{0}", strings.size() - 1).str();
      std::string data = text.str();
      data.push_back('\0');
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
      b.create<LLVM::GlobalOp>(loc, type, /*isConstant=*/true,
                               LLVM::Linkage::Internal, sym,
                               b.getStringAttr(data));
    }
    return addressOf(loc, sym);
  }

  /// Address of a constant int64 array named `name`. (Doubles go as scalar
  /// arguments: LLVM 19's translation rejects f64 array globals built here.)
  Value array(Location loc, StringRef name, ArrayRef<int64_t> v) {
    SmallVector<Attribute> elts;
    for (int64_t x : v)
      elts.push_back(b.getI64IntegerAttr(x));
    return constArray(loc, name, i64, elts);
  }

  ModuleOp module;
  OpBuilder b;
  Type ptr, i64, i32, f64, voidTy;

private:
  Value addressOf(Location loc, StringRef sym) {
    return b.create<LLVM::AddressOfOp>(loc, ptr, sym);
  }
  /// A global initialised element by element (LLVM 19 cannot translate a
  /// splat dense attribute into an array global).
  Value constArray(Location loc, StringRef name, Type elt,
                   ArrayRef<Attribute> elts) {
    std::string sym = uniqueName(name);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      auto type = LLVM::LLVMArrayType::get(elt, elts.size());
      auto global =
          b.create<LLVM::GlobalOp>(loc, type, /*isConstant=*/true,
                                   LLVM::Linkage::Internal, sym, Attribute());
      Block *init = b.createBlock(&global.getInitializerRegion());
      b.setInsertionPointToStart(init);
      Value agg = b.create<LLVM::UndefOp>(loc, type);
      for (auto [i, a] : llvm::enumerate(elts)) {
        Value c = b.create<LLVM::ConstantOp>(loc, elt, cast<TypedAttr>(a));
        agg = b.create<LLVM::InsertValueOp>(loc, agg, c,
                                            ArrayRef<int64_t>{int64_t(i)});
      }
      b.create<LLVM::ReturnOp>(loc, agg);
    }
    return addressOf(loc, sym);
  }
  std::string uniqueName(StringRef base) {
    std::string name = ("__rlhf_" + base).str();
    for (char &c : name)
      if (!llvm::isAlnum(c) && c != '_')
        c = '_';
    std::string out = name;
    for (int i = 1; module.lookupSymbol(out); ++i)
      out = name + "_" + std::to_string(i);
    return out;
  }

  std::map<std::string, std::string> strings;
};

/// {first, dp, tp, pp, micro-batches, sp, ring} of a placement
/// (rlhf_program.h): the ring size is the cost model's USP split of sp for
/// `heads` attention heads on nodes of `gpusPerNode`.
inline SmallVector<int64_t> layoutOf(r::MeshAttr mesh, r::StrategyAttr st,
                                     int64_t heads, int64_t gpusPerNode) {
  int64_t ring =
      r::splitSp(st.getSp(), st.getTp(), heads, gpusPerNode, mesh.getFirst())
          .ring;
  return {mesh.getFirst(), st.getDp(), st.getTp(), st.getPp(),
          st.getMbs(),     st.getSp(), ring};
}

/// A text setting's value: "..." with the bytes that would end it (and
/// control bytes) written %XX (rlhf_program.h).
inline std::string quoted(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text)
    out += c == '%' || c == ',' || c == '"' || c < 0x20
               ? llvm::formatv("%{0:X-2}", unsigned(c)).str()
               : std::string(1, char(c));
  return out + "\"";
}

/// "name=v" with v written so that it round-trips the double.
inline std::string numberSetting(llvm::StringRef name, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return name.str() + "=" + buf;
}

/// "k=v,..." of a settings dictionary: numbers and text.
inline std::string settingsString(DictionaryAttr d) {
  std::string s;
  for (NamedAttribute a : d) {
    double v = 0;
    if (auto t = dyn_cast<StringAttr>(a.getValue())) {
      s += (s.empty() ? "" : ",") + a.getName().str() + "=" +
           quoted(t.getValue());
      continue;
    }
    if (auto f = dyn_cast<FloatAttr>(a.getValue()))
      v = f.getValueAsDouble();
    else if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
      v = double(i.getInt());
    else
      continue;
    s += (s.empty() ? "" : ",") + numberSetting(a.getName(), v);
  }
  return s;
}

/// Main's calls that declare `models` (with each one's layout when an
/// iteration starts, from `initial`), `datasets` and the tokenizer to the
/// program `prog` (EmitDeclarations.cpp).
void emitDeclarations(Emitter &e, r::AlgorithmOp alg, Value prog,
                      ArrayRef<r::ModelOp> models,
                      ArrayRef<r::DatasetOp> datasets,
                      const llvm::StringMap<SmallVector<int64_t>> &initial);

} // namespace rlhfc::lowering

#endif // RLHFC_TRANSFORMS_RUNTIMEEMITTER_H
