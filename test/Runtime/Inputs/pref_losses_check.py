#!/usr/bin/env python3
"""Golden check of the stdlib's preference losses (dpo_loss with label
smoothing, ipo_loss, simpo_loss, orpo_loss): their fn code, evaluated by
rlhf-fn-eval on random pairs, against PyTorch written as TRL computes each
loss (DPOTrainer's sigmoid with label_smoothing and ipo, CPOTrainer's simpo,
ORPOTrainer's odds ratio).

  pref_losses_check.py FN_EVAL FNCODE --seed S

FNCODE holds the calls of test/Runtime/Inputs/pref-losses.rlhf, whose
settings are repeated below. Exits non-zero with a message when an output
differs by more than 1e-5 (relative, or absolute near 0).
"""
import argparse
import json
import math
import subprocess
import sys

import torch
import torch.nn.functional as F

N, L, V = 6, 8, 7


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def batch(gen):
    """Token ids [N, L], completion masks [N, L - 1] over the positions
    that predict a token (prompts of 1-3 tokens, then 1 or more completion
    tokens, then padding) and logits [N, L, V]."""
    seq = torch.randint(0, V, (N, L), generator=gen)
    mask = torch.zeros(N, L - 1)
    for i in range(N):
        start = int(torch.randint(0, 3, (1,), generator=gen))
        end = int(torch.randint(start + 1, L, (1,), generator=gen))
        mask[i, start:end] = 1
    logits = 2 * torch.randn(N, L, V, generator=gen)
    return seq, mask, logits


def logprobs(seq, logits):
    lp = F.log_softmax(logits.double()[:, :-1], -1)
    return lp.gather(-1, seq[:, 1:, None])[..., 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fn_eval")
    ap.add_argument("fncode")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(a.seed)
    c, mc, logits_c = batch(gen)
    r, mr, logits_r = batch(gen)
    ref_c = -torch.rand(N, L - 1, generator=gen).double() * 3
    ref_r = -torch.rand(N, L - 1, generator=gen).double() * 3

    lc, lr = logprobs(c, logits_c), logprobs(r, logits_r)
    sum_c, sum_r = (lc * mc).sum(-1), (lr * mr).sum(-1)
    avg_c, avg_r = sum_c / mc.sum(-1), sum_r / mr.sum(-1)
    ref_sum_c, ref_sum_r = (ref_c * mc).sum(-1), (ref_r * mr).sum(-1)
    ref_avg_c, ref_avg_r = ref_sum_c / mc.sum(-1), ref_sum_r / mr.sum(-1)

    want = {}
    # DPOTrainer, loss_type "sigmoid" with label_smoothing.
    beta, ls = 0.2, 0.1
    m = (sum_c - sum_r) - (ref_sum_c - ref_sum_r)
    want["dpo_loss"] = {
        "loss": (-F.logsigmoid(beta * m) * (1 - ls)
                 - F.logsigmoid(-beta * m) * ls).mean(),
        "accuracy": (m > 0).double().mean(),
        "reward_margin": (beta * m).mean()}
    # DPOTrainer, loss_type "ipo" (log-probabilities averaged per sequence).
    beta = 0.5
    m = (avg_c - avg_r) - (ref_avg_c - ref_avg_r)
    want["ipo_loss"] = {
        "loss": ((m - 1 / (2 * beta)) ** 2).mean(),
        "accuracy": (m > 0).double().mean(),
        "reward_margin": (beta * m).mean()}
    # CPOTrainer, loss_type "simpo": beta * (logits - simpo_gamma / beta).
    beta, gamma = 2.5, 1.5
    m = avg_c - avg_r
    want["simpo_loss"] = {
        "loss": -F.logsigmoid(beta * (m - gamma / beta)).mean(),
        "accuracy": (beta * avg_c > beta * avg_r).double().mean(),
        "reward_margin": (beta * m).mean()}
    # ORPOTrainer: nll of the chosen tokens minus beta * mean log sigmoid of
    # the log odds ratio.
    beta = 0.3
    log_odds = (avg_c - avg_r) - (torch.log1p(-torch.exp(avg_c))
                                  - torch.log1p(-torch.exp(avg_r)))
    nll = -(lc * mc).sum() / mc.sum()
    want["orpo_loss"] = {
        "loss": nll - beta * F.logsigmoid(log_odds).mean(),
        "accuracy": (log_odds > 0).double().mean(),
        "log_odds": log_odds.mean(),
        "nll": nll}

    inputs = {
        "inputs": [c.tolist(), r.tolist(), ref_c.tolist(), ref_r.tolist()],
        "masks": [mc.tolist(), mr.tolist(), None, None],
        "model": {"0": logits_c.tolist(), "1": logits_r.tolist()}}
    for fn, outs in want.items():
        two = fn in ("simpo_loss", "orpo_loss")
        x = dict(inputs)
        if two:
            x["inputs"], x["masks"] = x["inputs"][:2], x["masks"][:2]
        got = json.loads(subprocess.run(
            [a.fn_eval, a.fncode, "--fn", fn, "-"], input=json.dumps(x),
            capture_output=True, text=True, check=True).stdout)
        for k, v in outs.items():
            if k not in got:
                fail(f"{fn}: no output {k} in {sorted(got)}")
            if not math.isclose(got[k], float(v), rel_tol=1e-5, abs_tol=1e-6):
                fail(f"{fn}: {k} {got[k]!r}, PyTorch {float(v)!r}")
        print(f"OK: {fn}: " + ", ".join(
            f"{k} {float(v):.6g}" for k, v in outs.items()))


if __name__ == "__main__":
    main()
