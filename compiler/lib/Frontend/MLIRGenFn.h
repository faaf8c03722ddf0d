//===- MLIRGenFn.h - function bodies to the rlhf dialect (private) -*- C++
//-*-===//

#ifndef RLHFC_FRONTEND_MLIRGENFN_H
#define RLHFC_FRONTEND_MLIRGENFN_H

#include "rlhfc/Frontend/FnIR.h"

#include "mlir/IR/Builders.h"

namespace rlhfc {

/// Fills the empty `region` of an rlhf.compute or rlhf.train_step with
/// `body`: one block whose arguments take `inputs` (the call's kinded
/// tensors), `arith`, `math` and rlhf ops, and an rlhf.yield.
void buildFnRegion(mlir::OpBuilder &b, mlir::Region &region,
                   const sema::FnBody &body, mlir::TypeRange inputs);

} // namespace rlhfc

#endif // RLHFC_FRONTEND_MLIRGENFN_H
