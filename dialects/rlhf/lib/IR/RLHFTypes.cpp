//===- RLHFTypes.cpp - rlhf types -----------------------------------------===//

#include "rlhf/IR/RLHFDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::rlhf;

#define GET_TYPEDEF_CLASSES
#include "rlhf/IR/RLHFOpsTypes.cpp.inc"

void RLHFDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "rlhf/IR/RLHFOpsTypes.cpp.inc"
      >();
}

std::optional<TensorKind> mlir::rlhf::getTensorKind(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return std::nullopt;
  if (auto k = dyn_cast_or_null<TensorKindAttr>(t.getEncoding()))
    return k.getValue();
  return std::nullopt;
}

RankedTensorType mlir::rlhf::getKindedTensorType(MLIRContext *ctx,
                                                 ArrayRef<int64_t> shape,
                                                 Type elementType,
                                                 TensorKind kind) {
  return RankedTensorType::get(shape, elementType,
                               TensorKindAttr::get(ctx, kind));
}

RankedTensorType RecordType::getFieldType(StringRef name) const {
  for (auto [n, t] : llvm::zip(getNames(), getTypes()))
    if (n.getValue() == name)
      return t;
  return nullptr;
}

LogicalResult RecordType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<StringAttr> names,
                                 ArrayRef<RankedTensorType> types) {
  if (names.size() != types.size())
    return emitError() << "record has " << names.size() << " names but "
                       << types.size() << " types";
  llvm::SmallDenseSet<StringAttr> seen;
  for (auto [n, t] : llvm::zip(names, types)) {
    if (!seen.insert(n).second)
      return emitError() << "record field '" << n.getValue()
                         << "' appears twice";
    if (!getTensorKind(t))
      return emitError() << "record field '" << n.getValue()
                         << "' must be a tensor with a #rlhf.kind encoding";
  }
  return success();
}

// !rlhf.record<name: tensor<...>, ...>
Type RecordType::parse(AsmParser &parser) {
  SmallVector<StringAttr> names;
  SmallVector<RankedTensorType> types;
  auto parseField = [&]() -> ParseResult {
    std::string name;
    RankedTensorType type;
    if (parser.parseKeywordOrString(&name) || parser.parseColon() ||
        parser.parseType(type))
      return failure();
    names.push_back(StringAttr::get(parser.getContext(), name));
    types.push_back(type);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::LessGreater,
                                     parseField))
    return {};
  return parser.getChecked<RecordType>(parser.getContext(), names, types);
}

void RecordType::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleaveComma(llvm::zip(getNames(), getTypes()), printer,
                        [&](auto field) {
                          printer.printKeywordOrString(
                              std::get<0>(field).getValue());
                          printer << ": " << std::get<1>(field);
                        });
  printer << ">";
}
