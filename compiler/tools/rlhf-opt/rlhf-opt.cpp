//===- rlhf-opt.cpp - the rlhf optimizer driver ---------------------------===//
//
// Runs any rlhf pass alone on .mlir input; the lit tests drive the passes
// through this tool. It never links LibTorch.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "rlhf/IR/RLHFDialect.h"
#include "rlhfc/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  rlhfc::registerRLHFPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::rlhf::RLHFDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::math::MathDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "rlhf optimizer driver: runs rlhf passes on .mlir input\n",
      registry));
}
