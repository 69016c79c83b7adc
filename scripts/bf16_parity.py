"""bfloat16 against float32 on the packaged models, on the same device: how far the logits move and whether the
top next token and the top-5 agree. Run on a GPU by scripts/gpu_check.sh; runs on CPU too (slowly)."""

import sys

import torch

import interp

TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "So Mary is a really great friend, isn't",
    "The capital of France is",
]


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for name in ("smollm2-135m", "minilm-l6"):
        ref = interp.load(name, device=device, dtype=torch.float32)
        low = interp.load(name, device=device, dtype=torch.bfloat16)
        ids, mask = ref.to_tokens(TEXTS)
        with torch.inference_mode():
            a = ref(ids, mask).float()
            b = low(ids, mask).float()
        valid = mask.bool()
        diff = (a - b)[valid].abs()
        line = (
            f"{name}: max |diff| {diff.max():.4f}, mean {diff.mean():.5f}, scale {a[valid].abs().mean():.3f}"
        )
        if ref.cfg.lm_head != "none":
            agree = (a[valid].argmax(-1) == b[valid].argmax(-1)).float().mean()
            line += f", top-1 agreement {agree:.3f}"
        else:
            cos = torch.nn.functional.cosine_similarity(a[valid], b[valid], dim=-1)
            line += f", min cosine {cos.min():.5f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
