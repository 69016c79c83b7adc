"""The stated limits of a server: each bounds what one request may ask, and a request past one is refused with a
4xx naming the limit and the flag that sets it (``interp serve --max-prompt-tokens N`` ...)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def _limit(default: int, bounds: str) -> int:
    return field(default=default, metadata={"bounds": bounds})


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one request may ask of the server; every field is an ``interp serve`` flag (``--max-...``)."""

    max_body_bytes: int = _limit(2_000_000, "bytes of a request's body")
    max_prompt_tokens: int = _limit(1024, "tokens of a prompt (the model's context bounds it too)")
    max_new_tokens: int = _limit(512, "tokens generated per completion")
    max_prompts: int = _limit(8, "prompts of a batch request")
    max_results: int = _limit(1000, "features activation/all returns (num_results)")
    max_top_k: int = _limit(100, "features per token (topk-by-token's top_k, /steer's top_k)")
    max_similar: int = _limit(128, "features sae-topk-by-decoder-cossim returns (num_results)")
    max_graph_tokens: int = _limit(64, "tokens of a prompt /generate-graph attributes")
    max_feature_nodes: int = _limit(10_000, "feature nodes of a graph (max_feature_nodes)")
    max_graph_batch: int = _limit(1024, "rows per backward pass of /generate-graph (batch_size)")
    max_waiting: int = _limit(64, "requests waiting for the model at once")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag(f.name)} {value!r}; give a whole number >= 1")


def flag(name: str) -> str:
    """The command-line flag of a limit: ``max_prompt_tokens`` -> ``--max-prompt-tokens``."""
    return "--" + name.replace("_", "-")


def bounds() -> dict[str, str]:
    """``{field: what it bounds}`` of every limit."""
    return {f.name: f.metadata["bounds"] for f in fields(Limits)}
