#!/usr/bin/env python3
"""Checks what ref.ema(actor, decay = D) left in a run's checkpoints.

  ema_check.py RUN D [--bf16]
      RUN/checkpoints/step-1 and step-2 hold ref and actor. The ref of step 2
      is D * ref1 + (1 - D) * actor2, to fp32 rounding: the blend runs in
      fp32. With --bf16 the actor's weights that took part are its bf16
      compute weights (its checkpoint holds the fp32 master weights, of
      which they are the rounding), and the ref's checkpoint holds fp32
      master weights, not bf16 values: a blend of 1 - D in bf16 would be
      lost to rounding. Exits non-zero with a message when a check fails.
"""
import sys

import torch
from safetensors.torch import load_file


def weights(run, step, model):
    return load_file(f"{run}/checkpoints/step-{step}/{model}/model.safetensors")


def main():
    run, decay, bf16 = sys.argv[1], float(sys.argv[2]), "--bf16" in sys.argv
    ref1, ref2 = weights(run, 1, "ref"), weights(run, 2, "ref")
    actor2 = weights(run, 2, "actor")
    worst, moved, off_grid, total = 0.0, 0.0, 0, 0
    for name, r2 in ref2.items():
        src = actor2[name].double()
        if bf16:
            src = actor2[name].bfloat16().double()
        want = decay * ref1[name].double() + (1 - decay) * src
        worst = max(worst, (r2.double() - want).abs().max().item())
        moved = max(moved, (r2 - ref1[name]).abs().max().item())
        off_grid += int((r2.bfloat16().float() != r2).sum())
        total += r2.numel()
    print(f"max |ref2 - blend| {worst:.3g}, max |ref2 - ref1| {moved:.3g}, "
          f"{off_grid} of {total} not bf16 values")
    if worst > 1e-6:
        sys.exit(f"ref after step 2 is not the blend: off by {worst:.3g}")
    if moved == 0:
        sys.exit("ref did not move between steps 1 and 2")
    if bf16 and off_grid < total // 2:
        sys.exit("ref's checkpoint holds bf16 values, not fp32 master weights")


main()
