#!/usr/bin/env python3
"""Held-out measurements for the cost model on one GPU (PyTorch, bf16).

Generation: LLaMA-2 7B/13B shapes with random weights. Prefill is one eager
forward pass over the prompts with FlashAttention; a decode step is one CUDA
graph (gpt-fast style: static KV cache, no launch overhead per kernel) that
attends over a fixed context. A generation of G new tokens after a prompt of
P costs prefill + G * step(P + (G + 1) / 2): attention work grows linearly
with the context, so the step at the mean context is the mean step. The
script also times the steps at the first and last context to show that.

Inference: a forward pass of LLaMA-2 7B/13B with every position's logits and
next-token log-probabilities, as a reference or reward model computes them.

Training: one optimizer step (forward, backward, fused Adam on fp32 master
weights, bf16 autocast) on one micro-batch, of TinyLlama's 1.1B shape and of
LLaMA-2 7B and 70B layers truncated to 4 and 2 layers (to fit one GPU); the
truncated ones also with every layer recomputed in backward (activation
checkpointing, torch.utils.checkpoint).

With --cpu, on the CPU at a small shape (cpu_mid): inference, training and
generation with eager steps, for bench/runtime-vs-pytorch-cpu.py to set our
runtime beside.

With --compiled, generation only: each layer's norms, rotary embedding and
SwiGLU are compiled by TorchInductor (fused kernels, one compiled layer for
all layers); the cache write and attention stay eager; the same CUDA graph.

With --runtime-points, only the points rlhf-bench-gpu-runtime times through
our own runtime (LLaMA-2 7B decode and inference, TinyLlama and the
truncated 7B/70B training), so that a GPU other than the H100 gets PyTorch's
figures beside ours in the same window (scripts/gpu-check.sh).

Output: one line per point, read into docs/validation/measured-h100.csv;
with --csv FILE --hardware PRESET also those rows in that file's columns
(ids own_<gpu>_<category>_NN, as rlhf-bench-gpu-runtime --pytorch reads).

With --smoke, a few steps at a tiny shape: the points of
rlhf-bench-gpu-runtime --smoke. With --cpu too, they run on the CPU, and
--csv's rows then check the file's format against the benchmark
(test/CostModel/pytorch-rows.test); they measure nothing.
Usage (on the GPU machine):
  python3 scripts/measure-llama-h100.py [--smoke] [--only generate|inference|train|recompute]
  python3 scripts/measure-llama-h100.py --compiled
  python3 scripts/measure-llama-h100.py --runtime-points --hardware H200 --csv F
"""
import argparse
import csv
import gc
import sys
import time

import torch
import torch.utils.checkpoint
import torch.nn.functional as F

SHAPES = {  # layers, hidden, heads, kv heads, ffn, vocab
    "llama2_7b": (32, 4096, 32, 32, 11008, 32000),
    "llama2_13b": (40, 5120, 40, 40, 13824, 32000),
    "tinyllama_1p1b": (22, 2048, 32, 4, 5632, 32000),
    # Truncated 7B and 70B: their layer widths, few layers, so that full
    # training fits one GPU.
    "llama2_7b_l4": (4, 4096, 32, 32, 11008, 32000),
    "llama2_70b_l2": (2, 8192, 64, 8, 28672, 32000),
    "smoke": (2, 256, 4, 4, 688, 1000),
    # LLaMA-2's vocabulary at a width a CPU trains in a second (--cpu).
    "cpu_mid": (4, 1024, 16, 16, 2816, 32000),
}

# Everything also runs on the CPU (--cpu), generation with eager steps (no
# CUDA graphs there).
DEV = "cuda"
# --cpu's points: (batch, seq) for inference, then for training; (batch,
# prompt, new tokens) for generation.
CPU_POINTS = ([(4, 256), (8, 512)], [(2, 256), (4, 512)], [(1, 128, 32), (16, 128, 32)])
# LLaMA-2 7B's (batch, new tokens) after 128-token prompts, the planner
# benchmark's generation lengths with batches whose KV cache fits one 80 GB
# GPU beside the weights; and its (batch, seq) for inference.
DECODE_7B = [(1, 128), (16, 384), (64, 128), (64, 896), (128, 384), (256, 128)]
INFERENCE_7B = [(16, 256), (64, 256), (32, 512), (128, 512), (16, 1024)]
# The compute dtype; --cpu --fp32 makes it fp32 (weights, caches, no
# autocast), for CPUs whose bf16 is emulated.
DTYPE = torch.bfloat16
# --csv: the rows' writer, hardware preset, id prefix and count per category.
ROWS = None


def record(category, name, batch, seq_in, seq_out, value, notes):
    """One measured-h100.csv row for a plain (unfused, unrecomputed) point."""
    if ROWS is None:
        return
    n = ROWS["n"][category] = ROWS["n"].get(category, 0) + 1
    ROWS["writer"].writerow([
        f"{ROWS['prefix']}{category}_{n:02d}", category, name,
        ROWS["hardware"], 1, 1, 1, 1, batch, seq_in, seq_out or "",
        "fp32" if DTYPE == torch.float32 else "bf16",
        "tokens_per_sec", f"{value:.1f}", "tok/s", ROWS["source"],
        f"random weights; {notes}"])
    ROWS["file"].flush()


class Llama:
    """Weights of a LLaMA decoder as plain tensors (no nn.Module overhead)."""

    def __init__(self, shape, dtype, requires_grad=False):
        L, h, a, kv, ffn, V = shape
        self.L, self.h, self.a, self.kv, self.ffn, self.V = shape
        self.hd = h // a
        dev = DEV

        def w(*s):
            t = torch.randn(*s, device=dev, dtype=dtype) * 0.02
            return t.requires_grad_(requires_grad)

        self.embed = w(V, h)
        self.layers = []
        for _ in range(L):
            self.layers.append(
                dict(
                    n1=torch.ones(h, device=dev, dtype=dtype).requires_grad_(requires_grad),
                    qkv=w(h + 2 * kv * self.hd, h),
                    o=w(h, h),
                    n2=torch.ones(h, device=dev, dtype=dtype).requires_grad_(requires_grad),
                    gu=w(2 * ffn, h),
                    down=w(h, ffn),
                )
            )
        self.norm = torch.ones(h, device=dev, dtype=dtype).requires_grad_(requires_grad)
        self.head = w(V, h)
        # --compiled swaps these for TorchInductor-compiled versions.
        self.pre_fn, self.post_fn = self.pre, self.post

    def params(self):
        out = [self.embed, self.norm, self.head]
        for l in self.layers:
            out += list(l.values())
        return out

    def rope(self, x, pos):
        # x: [B, heads, T, hd]; pos: [T] positions.
        half = self.hd // 2
        inv = 1.0 / (10000 ** (torch.arange(half, device=x.device, dtype=torch.float32) / half))
        ang = pos.float()[:, None] * inv[None, :]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def pre(self, l, x, pos):
        """Norm, q/k/v projection and rotary embedding of x [B, T, h]."""
        B, T, h = x.shape
        y = F.rms_norm(x, (h,), l["n1"])
        qkv = y @ l["qkv"].t()
        q, k, v = qkv.split([h, self.kv * self.hd, self.kv * self.hd], dim=-1)
        q = q.view(B, T, self.a, self.hd).transpose(1, 2)
        k = k.view(B, T, self.kv, self.hd).transpose(1, 2)
        v = v.view(B, T, self.kv, self.hd).transpose(1, 2)
        return self.rope(q, pos), self.rope(k, pos), v

    def post(self, l, x, att):
        """Output projection, norm and SwiGLU MLP, with both residuals."""
        B, T, h = x.shape
        x = x + att.transpose(1, 2).reshape(B, T, h) @ l["o"].t()
        y = F.rms_norm(x, (h,), l["n2"])
        g, u = (y @ l["gu"].t()).chunk(2, dim=-1)
        return x + (F.silu(g) * u) @ l["down"].t()

    def block(self, l, x, pos, cache=None, ctx=None):
        """One layer on x [B, T, h]. With a cache ([2, B, kv, maxCtx, hd]):
        writes the new keys/values at `pos` and attends over [0, ctx)."""
        q, k, v = self.pre_fn(l, x, pos)
        if cache is not None:
            cache[0].index_copy_(2, pos, k)
            cache[1].index_copy_(2, pos, v)
        if cache is not None and ctx is not None:
            k, v = cache[0, :, :, :ctx], cache[1, :, :, :ctx]
            causal = False
        else:
            causal = True
        if self.kv != self.a:  # grouped-query attention: share each kv head
            k = k.repeat_interleave(self.a // self.kv, dim=1)
            v = v.repeat_interleave(self.a // self.kv, dim=1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.post_fn(l, x, att)

    def forward(self, tokens, pos, caches=None, ctx=None, recompute=False):
        x = self.embed[tokens]
        for i, l in enumerate(self.layers):
            if recompute:  # keep the layer's input, replay it in backward
                x = torch.utils.checkpoint.checkpoint(
                    self.block, l, x, pos, use_reentrant=False)
                continue
            x = self.block(l, x, pos, None if caches is None else caches[i], ctx)
        x = F.rms_norm(x, (self.h,), self.norm)
        return x[:, -1:] @ self.head.t() if caches is not None else x @ self.head.t()


def timed(fn, reps, warm=2):
    for _ in range(warm):
        fn()
    if DEV == "cpu":
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3 / reps


@torch.inference_mode()
def generation(name, batch, prompt, gen, reps, compiled=False):
    m = Llama(SHAPES[name], DTYPE)
    maxCtx = prompt + gen
    caches = torch.zeros(m.L, 2, batch, m.kv, maxCtx, m.hd, device=DEV, dtype=DTYPE)
    tokens = torch.randint(0, m.V, (batch, prompt), device=DEV)
    ppos = torch.arange(prompt, device=DEV)
    prefill = timed(lambda: m.forward(tokens, ppos, caches), max(1, reps // 4), warm=1)

    def step_at(ctx, graph):
        tok = torch.randint(0, m.V, (batch, 1), device=DEV)
        pos = torch.tensor([ctx - 1], device=DEV)
        run = lambda: m.forward(tok, pos, caches, ctx).argmax(-1)
        if not graph:
            return timed(run, reps)
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
        t = timed(g.replay, reps)
        del g
        return t

    mean = prompt + (gen + 1) // 2
    first, last = prompt + 1, prompt + gen
    if DEV == "cpu":  # eager steps only
        s_mean = step_at(mean, False)
        total = prefill + gen * s_mean
        print(
            f"generate model={name} gpus=0 tp=1 batch={batch} prompt={prompt} gen={gen} "
            f"prefill_s={prefill:.5f} step_eager_ms={s_mean*1e3:.3f} total_s={total:.4f} "
            f"tokens_per_sec={batch*gen/total:.1f}",
            flush=True,
        )
        record("decode", name, batch, prompt, gen, batch * gen / total,
               f"prefill {prefill*1e3:.1f} ms + {gen} eager decode steps at "
               f"the mean context ({s_mean*1e3:.3f} ms) on the CPU")
        return
    if compiled:
        # The decode layers' norms, rotary embedding and SwiGLU fused by
        # TorchInductor (compiled once, shared by all layers); the cache
        # write and attention stay eager kernels; all under one CUDA graph.
        m.pre_fn = torch.compile(m.pre, fullgraph=True, dynamic=False)
        m.post_fn = torch.compile(m.post, fullgraph=True, dynamic=False)
        s_mean = step_at(mean, True)
        total = prefill + gen * s_mean
        print(
            f"generate engine=compiled model={name} gpus=1 tp=1 batch={batch} "
            f"prompt={prompt} gen={gen} prefill_s={prefill:.5f} "
            f"step_mean_ms={s_mean*1e3:.3f} total_s={total:.4f} "
            f"tokens_per_sec={batch*gen/total:.1f}",
            flush=True,
        )
        del caches, m
        torch._dynamo.reset()
        gc.collect()  # the compiled methods and the model refer to each other
        torch.cuda.empty_cache()
        return
    s_mean = step_at(mean, True)
    s_first = step_at(first, True)
    s_last = step_at(last, True)
    s_eager = step_at(mean, False)
    total = prefill + gen * s_mean
    print(
        f"generate model={name} gpus=1 tp=1 batch={batch} prompt={prompt} gen={gen} "
        f"prefill_s={prefill:.5f} step_first_ms={s_first*1e3:.3f} step_mean_ms={s_mean*1e3:.3f} "
        f"step_last_ms={s_last*1e3:.3f} step_eager_ms={s_eager*1e3:.3f} total_s={total:.4f} "
        f"tokens_per_sec={batch*gen/total:.1f}",
        flush=True,
    )
    record("decode", name, batch, prompt, gen, batch * gen / total,
           f"prefill {prefill*1e3:.1f} ms + {gen} CUDA-graph decode steps at "
           f"the mean context ({s_mean*1e3:.3f} ms); unfused PyTorch kernels, "
           "contiguous KV cache")
    del caches, m
    torch.cuda.empty_cache()


@torch.inference_mode()
def inference(name, batch, seq, reps):
    """A forward pass with every position's logits and the log-probability of
    each next token, as a reference or reward model's inference call."""
    m = Llama(SHAPES[name], DTYPE)
    tokens = torch.randint(0, m.V, (batch, seq), device=DEV)
    pos = torch.arange(seq, device=DEV)

    def run():
        logits = m.forward(tokens, pos)
        lp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        return lp.gather(-1, tokens[:, 1:].unsqueeze(-1))

    t = timed(run, reps, warm=1)
    print(
        f"inference model={name} gpus=1 tp=1 batch={batch} seq={seq} "
        f"step_s={t:.4f} tokens_per_sec={batch*seq/t:.1f}",
        flush=True,
    )
    record("inference", name, batch, seq, 0, batch * seq / t,
           f"forward + next-token log-probs, {t*1e3:.1f} ms")
    del m
    empty_cache()


def empty_cache():
    if DEV == "cuda":
        torch.cuda.empty_cache()


def training(name, batch, seq, reps, recompute=False):
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()
    m = Llama(SHAPES[name], torch.float32, requires_grad=True)
    opt = torch.optim.Adam(m.params(), lr=1e-5, fused=True)
    tokens = torch.randint(0, m.V, (batch, seq + 1), device=DEV)
    pos = torch.arange(seq, device=DEV)

    def step():
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=DTYPE != torch.float32):
            logits = m.forward(tokens[:, :-1], pos, recompute=recompute)
        loss = F.cross_entropy(logits.float().view(-1, m.V), tokens[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = timed(step, reps)
    nparams = sum(p.numel() for p in m.params())
    print(
        f"train model={name} gpus=1 tp=1 batch={batch} seq={seq} params={nparams} "
        f"recompute={int(recompute)} "
        f"step_s={t:.4f} tokens_per_sec={batch*seq/t:.1f} "
        f"peak_gb={torch.cuda.max_memory_allocated()/1e9 if DEV == 'cuda' else 0:.1f}",
        flush=True,
    )
    if not recompute:
        record("train", name, batch, seq, 0, batch * seq / t,
               f"one step {t:.4f} s: forward and backward under bf16 "
               "autocast on fp32 weights, fused Adam; no recomputation")
    del opt, m
    empty_cache()


def smoke(compiled=False):
    """rlhf-bench-gpu-runtime --smoke's points, and recomputed training."""
    generation("smoke", 2, 8, 4, 4, compiled=compiled)
    inference("smoke", 2, 16, 2)
    training("smoke", 2, 16, 2)
    training("smoke", 2, 16, 2, recompute=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true",
                    help="a few steps at a tiny shape (rlhf-bench-gpu-runtime "
                         "--smoke's points); with --cpu on the CPU")
    ap.add_argument("--only", choices=["generate", "inference", "train", "recompute"])
    ap.add_argument("--compiled", action="store_true",
                    help="generation only, decode layers compiled by TorchInductor")
    ap.add_argument("--runtime-points", action="store_true",
                    help="only the points rlhf-bench-gpu-runtime measures")
    ap.add_argument("--csv", metavar="FILE",
                    help="also write the plain points' rows to FILE "
                         "(measured-h100.csv's columns); needs --hardware")
    ap.add_argument("--hardware", metavar="PRESET",
                    help="the cost model's preset of this GPU (H100_SXM, "
                         "H200, ...) for --csv's rows")
    ap.add_argument("--cpu", action="store_true",
                    help="inference, training and generation of cpu_mid on the "
                         "CPU (with --smoke: the smoke points)")
    ap.add_argument("--fp32", action="store_true",
                    help="with --cpu: in fp32, for a CPU without native bf16")
    args = ap.parse_args()
    if args.fp32 and not args.cpu:
        ap.error("--fp32 goes with --cpu (the GPU runs are bf16)")
    if bool(args.csv) != bool(args.hardware):
        ap.error("--csv and --hardware go together (the rows name the preset)")
    if args.csv and args.compiled:
        ap.error("--csv records the plain points; drop --compiled")
    if args.csv and args.cpu and not args.smoke:
        ap.error("--csv records the GPU's points; with --cpu only --smoke's "
                 "(a check of the rows' format)")
    if args.csv:
        global ROWS
        tag = args.hardware.lower().removesuffix("_sxm")
        f = open(args.csv, "w", newline="")
        w = csv.writer(f, lineterminator="\n")
        w.writerow("id,category,model,hardware,gpus,tp,pp,dp,batch,seq_in,"
                   "seq_out,dtype,metric,value,unit,source,notes".split(","))
        ROWS = {"writer": w, "file": f, "hardware": args.hardware,
                "prefix": f"own_{tag}_", "n": {},
                "source": "scripts/measure-llama-h100.py " + (
                    "--smoke" + " --cpu" * args.cpu if args.smoke
                    else "--runtime-points")}
    torch.manual_seed(0)
    if args.cpu:
        global DEV, DTYPE
        DEV = "cpu"
        DTYPE = torch.float32 if args.fp32 else torch.bfloat16
        print(f"# CPU, {torch.get_num_threads()} threads, torch {torch.__version__}, "
              f"{'fp32' if args.fp32 else 'bf16'}", flush=True)
        if args.smoke:
            smoke()
            return
        for batch, seq in CPU_POINTS[0]:
            inference("cpu_mid", batch, seq, 3)
        for batch, seq in CPU_POINTS[1]:
            training("cpu_mid", batch, seq, 3)
        for batch, prompt, gen in CPU_POINTS[2]:
            generation("cpu_mid", batch, prompt, gen, 8)
        return
    p = torch.cuda.get_device_properties(0)
    print(f"# {p.name}, {p.multi_processor_count} SMs, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d')}", flush=True)
    if args.smoke:
        smoke(compiled=args.compiled)
        return
    if args.runtime_points:
        # rlhf-bench-gpu-runtime's points (bench/RuntimeGpuBench.cpp).
        for batch, gen in DECODE_7B:
            generation("llama2_7b", batch, 128, gen, 20)
        for batch, seq in INFERENCE_7B:
            inference("llama2_7b", batch, seq, 5)
        for name, points in [("tinyllama_1p1b", [(16, 512), (8, 1024), (4, 2048)]),
                             ("llama2_7b_l4", [(8, 512), (8, 1024), (16, 1024)]),
                             ("llama2_70b_l2", [(4, 1024), (8, 1024)])]:
            for batch, seq in points:
                training(name, batch, seq, 5)
        return
    if args.compiled:
        for batch, gen in DECODE_7B:
            generation("llama2_7b", batch, 128, gen, 20, compiled=True)
        for batch, gen in [(1, 128), (64, 384)]:
            generation("llama2_13b", batch, 128, gen, 20, compiled=True)
        return
    if args.only in (None, "generate"):
        for batch, gen in DECODE_7B:
            generation("llama2_7b", batch, 128, gen, 20)
        for batch, gen in [(1, 128), (64, 384)]:
            generation("llama2_13b", batch, 128, gen, 20)
    if args.only in (None, "inference"):
        for batch, seq in INFERENCE_7B:
            inference("llama2_7b", batch, seq, 5)
        for batch, seq in [(16, 256), (64, 512)]:
            inference("llama2_13b", batch, seq, 5)
    if args.only in (None, "recompute"):
        for batch, seq in [(8, 1024), (16, 1024)]:
            training("llama2_7b_l4", batch, seq, 5, recompute=True)
        training("llama2_70b_l2", 8, 1024, 5, recompute=True)
    if args.only in (None, "train"):
        for batch, seq in [(8, 1024), (4, 2048), (16, 512)]:
            training("tinyllama_1p1b", batch, seq, 5)
        for batch, seq in [(8, 1024), (16, 1024), (8, 512)]:
            training("llama2_7b_l4", batch, seq, 5)
        for batch, seq in [(4, 1024), (8, 1024)]:
            training("llama2_70b_l2", batch, seq, 5)


if __name__ == "__main__":
    sys.exit(main())
