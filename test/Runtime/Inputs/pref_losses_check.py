#!/usr/bin/env python3
"""Golden check of the stdlib's preference losses (dpo_loss with label
smoothing and rpo_alpha, hinge_loss, ipo_loss, simpo_loss, orpo_loss, and
KTO's kto_kl and kto_loss): their fn code, evaluated by rlhf-fn-eval on
random pairs, against PyTorch written as TRL computes each loss
(DPOTrainer's sigmoid with label_smoothing and rpo_alpha, hinge and ipo,
CPOTrainer's simpo, ORPOTrainer's odds ratio, KTOTrainer's kto).

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


def run(fn_eval, fncode, fn, x):
    return json.loads(subprocess.run(
        [fn_eval, fncode, "--fn", fn, "-"], input=json.dumps(x),
        capture_output=True, text=True, check=True).stdout)


def close(fn, k, got, want):
    if not math.isclose(got, float(want), rel_tol=1e-5, abs_tol=1e-6):
        fail(f"{fn}: {k} {got!r}, PyTorch {float(want)!r}")


def check_kto(a, gen):
    """KTOTrainer.kto_loss with loss_type "kto": the reference point from
    mismatched rows, (policy - reference) summed log-probabilities averaged
    over the batch and clamped at 0, then each row's sigmoid loss by its
    label, weighted per class, averaged over every row."""
    kl_seq, kl_mask, _ = batch(gen)
    pk = -torch.rand(N, L - 1, generator=gen).double() * 3
    rk = -torch.rand(N, L - 1, generator=gen).double() * 3
    zs = []
    # Both orders: one of the two means is negative and clamps to 0.
    for lp, ref in ((pk, rk), (rk, pk)):
        want = ((lp * kl_mask).sum(-1) - (ref * kl_mask).sum(-1)).mean()
        want = want.clamp(min=0)
        got = run(a.fn_eval, a.fncode, "kto_kl", {
            "inputs": [kl_seq.tolist(), lp.tolist(), ref.tolist()],
            "masks": [kl_mask.tolist(), None, None]})["kl"]
        if len(got) != N:
            fail(f"kto_kl: {len(got)} rows, want {N}")
        for g in got:
            close("kto_kl", "kl", g, want)
        zs.append(float(want))
    if min(zs) != 0 or max(zs) <= 0:
        fail(f"kto_kl: the two orders gave {zs}; one should clamp to 0")

    seq, mask, logits = batch(gen)
    ref = -torch.rand(N, L - 1, generator=gen).double() * 3
    label = torch.tensor([1.0, 0.0] * (N // 2))[torch.randperm(N, generator=gen)]
    beta, wd, wu = 0.3, 1.5, 0.7
    z = torch.tensor(max(zs) / 4, dtype=torch.double)
    lr = (logprobs(seq, logits) * mask).sum(-1) - (ref * mask).sum(-1)
    good = label > 0
    chosen = wd * (1 - torch.sigmoid(beta * (lr[good] - z)))
    rejected = wu * (1 - torch.sigmoid(beta * (z - lr[~good])))
    want = {"loss": torch.cat([chosen, rejected]).nanmean(), "kl": z,
            "accuracy": torch.where(good, lr > z, lr < z).double().mean()}
    got = run(a.fn_eval, a.fncode, "kto_loss", {
        "inputs": [seq.tolist(), ref.tolist(), label.tolist(),
                   [float(z)] * N],
        "masks": [mask.tolist(), None, None, None],
        "model": {"0": logits.tolist()}})
    for k, v in want.items():
        if k not in got:
            fail(f"kto_loss: no output {k} in {sorted(got)}")
        close("kto_loss", k, got[k], v)
    print("OK: kto_kl: " + ", ".join(f"{x:.6g}" for x in zs))
    print("OK: kto_loss: " + ", ".join(
        f"{k} {float(v):.6g}" for k, v in want.items()))


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
    # DPOTrainer, loss_type "sigmoid" with label_smoothing, plus rpo_alpha
    # times the chosen tokens' cross-entropy (a mean over the batch's
    # chosen tokens).
    beta, ls, alpha = 0.2, 0.1, 0.7
    m = (sum_c - sum_r) - (ref_sum_c - ref_sum_r)
    want["dpo_loss"] = {
        "loss": (-F.logsigmoid(beta * m) * (1 - ls)
                 - F.logsigmoid(-beta * m) * ls).mean()
                + alpha * -(lc * mc).sum() / mc.sum(),
        "accuracy": (m > 0).double().mean(),
        "reward_margin": (beta * m).mean()}
    # DPOTrainer, loss_type "hinge" (SLiC): relu(1 - beta * margin).
    beta = 0.4
    want["hinge_loss"] = {
        "loss": torch.relu(1 - beta * m).mean(),
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
        got = run(a.fn_eval, a.fncode, fn, x)
        for k, v in outs.items():
            if k not in got:
                fail(f"{fn}: no output {k} in {sorted(got)}")
            close(fn, k, got[k], v)
        print(f"OK: {fn}: " + ", ".join(
            f"{k} {float(v):.6g}" for k, v in outs.items()))
    check_kto(a, gen)


if __name__ == "__main__":
    main()
