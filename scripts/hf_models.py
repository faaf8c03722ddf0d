"""Tiny Hugging Face checkpoints and their golden logits, for
scripts/hf-fixtures.py's `models` and `check-export` subcommands: random
LLaMA-2, LLaMA-3 (rope scaling, sharded), Mistral (a bf16 file) and Qwen2
(q/k/v biases, tied embeddings) decoders built with transformers'
from_config and save_pretrained, offline.
"""
import os
import sys


# Shrunk from the published configs (layers, widths, vocab), keeping what
# the decoder computes with: GQA ratios, rope bases and scaling, norm eps,
# biases, tied embeddings.
TINY = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
            num_attention_heads=4, vocab_size=256, hidden_act="silu")
HF_MODELS = {
    # meta-llama/Llama-2-7b-hf
    "llama2": ("LlamaConfig", dict(num_key_value_heads=4, rope_theta=10000.0,
                                   rms_norm_eps=1e-5,
                                   max_position_embeddings=128)),
    # meta-llama/Llama-3.1-8B: rope_scaling as published.
    "llama3": ("LlamaConfig", dict(
        num_key_value_heads=2, rope_theta=500000.0, rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        rope_scaling={"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192})),
    # mistralai/Mistral-7B-v0.1
    "mistral": ("MistralConfig", dict(num_key_value_heads=2,
                                      rope_theta=10000.0, rms_norm_eps=1e-5,
                                      sliding_window=4096,
                                      max_position_embeddings=32768)),
    # Qwen/Qwen2.5-0.5B
    "qwen2": ("Qwen2Config", dict(num_key_value_heads=2, rope_theta=1000000.0,
                                  rms_norm_eps=1e-6, tie_word_embeddings=True,
                                  use_sliding_window=False,
                                  sliding_window=32768,
                                  max_position_embeddings=32768)),
}
PROMPT_LEN = 48


def hf_model(name):
    import torch
    import transformers
    kind, extra = HF_MODELS[name]
    cfg = getattr(transformers, kind)(**TINY, **extra)
    torch.manual_seed(sum(map(ord, name)))
    model = transformers.AutoModelForCausalLM.from_config(
        cfg, attn_implementation="eager", dtype=torch.float32).eval()
    # Every weight random, norms and biases too: a zero bias or a unit norm
    # would hide a loader or model that drops it.
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in n
                    else 0.05 * torch.randn_like(p))
    return model


def logits_of(model, ids):
    import torch
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def write_models(outdir):
    import torch
    from safetensors.torch import save_file
    for name in HF_MODELS:
        model = hf_model(name)
        if name == "mistral":  # a bf16 file: goldens from the rounded weights
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.to(torch.bfloat16).float())
        g = torch.Generator().manual_seed(7)
        ids = torch.randint(0, TINY["vocab_size"], (2, PROMPT_LEN), generator=g)
        logits = logits_of(model, ids)
        if name == "llama3":  # the scaling must matter on these positions
            plain = hf_model(name)
            plain.config.rope_scaling = None
            plain.model.rotary_emb = type(plain.model.rotary_emb)(
                config=plain.config)
            plain.load_state_dict(model.state_dict())
            if (logits_of(plain, ids) - logits).abs().max() < 1e-3:
                sys.exit("hf-fixtures: llama3 rope scaling changes no logit")
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        kw = {"safe_serialization": True}
        if name == "llama3":
            kw["max_shard_size"] = "100KB"
        if name == "mistral":
            model = model.to(torch.bfloat16)
        model.save_pretrained(d, **kw)
        save_file({"ids": ids.float().contiguous(), "logits": logits.contiguous()},
                  os.path.join(d, "golden.safetensors"))
        print(f"{name}: {sum(p.numel() for p in model.parameters())} "
              f"parameters in {d}")


def check_exports(exports, outdir):
    import torch
    import transformers
    from safetensors.torch import load_file
    worst = 0.0
    for name in HF_MODELS:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(exports, name), attn_implementation="eager",
            dtype=torch.float32).eval()
        golden = load_file(os.path.join(outdir, name, "golden.safetensors"))
        diff = (logits_of(model, golden["ids"].long()) -
                golden["logits"]).abs().max().item()
        print(f"{name}: exported checkpoint loads in transformers, logits "
              f"max diff {diff:.3g}")
        worst = max(worst, diff)
    if worst > 1e-4:
        sys.exit(f"hf-fixtures: exported logits differ by {worst:.3g}")
