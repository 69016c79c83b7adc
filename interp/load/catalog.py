"""What ``interp models`` says about the checkpoint families: where each loads from, what it adds to the hook
names, and what the tests check it against.

The config types and GGUF architectures come from :data:`interp.load.families.FAMILIES`; this module only adds
the words. Every claim under "verified" is a test in ``tests/load/`` (parity with ``transformers`` on tiny
random checkpoints: logits, every pattern and every ``hook_resid_pre`` within 1e-5 in float32, tokens
identical).
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.load.families import FAMILIES

_FOLDER = "folder"
_LLAMA_CPP = "GGUF written by llama.cpp's converter"
_ROUTERS = "router logits against output_router_logits"
_MOE_HOOKS = "mlp.hook_router_logits, hook_expert_indices, hook_expert_weights, mlp.experts.E.*"


@dataclass(frozen=True)
class FamilyInfo:
    """One row of the table."""

    name: str
    model_types: tuple[str, ...]
    hooks: str
    verified: tuple[str, ...]

    def gguf(self) -> str:
        names = [FAMILIES[t].from_gguf.name for t in self.model_types if FAMILIES[t].from_gguf is not None]
        return ", ".join(names) or "-"


CATALOG = (
    FamilyInfo("GPT-2", ("gpt2",), "hook_pos_embed (learned positions)", (_FOLDER,)),
    FamilyInfo("BERT", ("bert",), "embed_ln; post-norm blocks", (_FOLDER, "MiniLM (packaged)")),
    FamilyInfo(
        "Llama 2/3.x, SmolLM",
        ("llama",),
        "attn.hook_rot_q/k",
        (_FOLDER, "quantized GGUF", _LLAMA_CPP + " (Llama 3.1 rotary)", "SmolLM2 (packaged GGUF)"),
    ),
    FamilyInfo("Mistral", ("mistral",), "sliding windows (masks)", (_FOLDER,)),
    FamilyInfo(
        "Qwen2/2.5", ("qwen2",), "sliding windows (masks)", (_FOLDER, _LLAMA_CPP + " (SentencePiece)")
    ),
    FamilyInfo(
        "Qwen3", ("qwen3",), "attn.q_norm.*, attn.k_norm.* (per head)", (_FOLDER, _LLAMA_CPP + " (yarn)")
    ),
    FamilyInfo("Gemma", ("gemma",), "scaled hook_embed", (_FOLDER, _LLAMA_CPP + " (SentencePiece)")),
    FamilyInfo(
        "Gemma 2",
        ("gemma2",),
        "ln1_post.*, ln2_post.*; soft-capped scores and logits",
        (_FOLDER, _LLAMA_CPP + " (SentencePiece)"),
    ),
    FamilyInfo(
        "Gemma 3",
        ("gemma3_text", "gemma3"),
        "ln1_post.*, ln2_post.*, attn.q_norm.*, attn.k_norm.*",
        (_FOLDER, _LLAMA_CPP + " (linear rotary, local base)"),
    ),
    FamilyInfo(
        "GPT-NeoX, Pythia",
        ("gpt_neox",),
        "no hook_resid_mid (parallel blocks); partial rotary",
        (_FOLDER, _LLAMA_CPP),
    ),
    FamilyInfo("Phi-3", ("phi3",), "-", (_FOLDER, _LLAMA_CPP + " (longrope, SentencePiece)")),
    FamilyInfo(
        "OLMo 2",
        ("olmo2",),
        "ln1_post.*, ln2_post.* (no ln1, ln2); attn.q_norm/k_norm over all heads",
        (_FOLDER, _LLAMA_CPP),
    ),
    FamilyInfo(
        "Mixtral", ("mixtral",), _MOE_HOOKS, (_FOLDER, _ROUTERS, _LLAMA_CPP + " (llama with experts)")
    ),
    FamilyInfo(
        "Qwen2-MoE",
        ("qwen2_moe",),
        "as Mixtral, plus mlp.shared_expert.*, mlp.hook_shared_expert_weight; some layers dense",
        (_FOLDER, _ROUTERS, "dense layers, weights renormalised or not", _LLAMA_CPP),
    ),
    FamilyInfo(
        "Qwen3-MoE",
        ("qwen3_moe",),
        "as Mixtral, plus attn.q_norm.*, attn.k_norm.*",
        (_FOLDER, _ROUTERS, _LLAMA_CPP),
    ),
    FamilyInfo(
        "OLMoE", ("olmoe",), "as Mixtral, plus q/k norms over all heads", (_FOLDER, _ROUTERS, _LLAMA_CPP)
    ),
    FamilyInfo(
        "GPT-OSS",
        ("gpt_oss",),
        "as Mixtral; patterns leave each head's sink share out (rows sum below 1); alternating windows",
        (
            _FOLDER,
            _ROUTERS,
            "MXFP4 experts dequantized as transformers dequantizes them",
            _LLAMA_CPP + " (float and MXFP4)",
        ),
    ),
)


def format_families() -> str:
    """A table of the families: config model types, GGUF architectures, hook names added, what is verified."""
    rows = [("family", "config.json model_type", "GGUF architecture", "adds to the hook names; notes")]
    rows += [(f.name, ", ".join(f.model_types), f.gguf(), f.hooks) for f in CATALOG]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in rows
    ]
    verified = [f"  {f.name}: {'; '.join(f.verified)}" for f in CATALOG]
    return "\n".join(
        [
            *lines,
            "",
            "Verified against transformers on tiny random checkpoints written by the tests (logits, every pattern",
            "and the residual stream within 1e-5 in float32, tokens identical), and on the packaged models:",
            *verified,
        ]
    )
