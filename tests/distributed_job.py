"""A study-shaped job for the distributed tests: ``python -m tests.distributed_job OUT [--fail]``.

Each rank takes its contiguous share of the items, computes per-item records and counts, and rank 0 merges
them into ``OUT`` (JSON). With ``--fail``, rank 1 then raises while rank 0 waits for it at a barrier.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter

import torch

from interp import distributed
from tests.store.models import sentences, tiny_model

HOOK = "blocks.1.attn.hook_z"


def records_for(indices: range) -> tuple[list[dict], Counter]:
    """Per item: the norm of each head's z at the last token; and a token count."""
    model, texts = tiny_model(), sentences(23, seed=6)
    records, counts = [], Counter()
    for i in indices:
        ids, mask = model.to_tokens([texts[i]])
        _, cache = model.run_with_cache(ids, mask, names_filter=HOOK)
        z = cache[HOOK][0, -1]  # [head, d_head]
        records.append({"item": i, "norms": z.norm(dim=-1).tolist()})
        counts["tokens"] += int(mask.sum())
    return records, counts


def main(out: str, fail: bool) -> None:
    torch.set_num_threads(1)
    with distributed.session():
        records, counts = records_for(distributed.shard_range(23))
        parts = distributed.gather_objects((records, counts))
        if distributed.rank() == 0:
            merged = {
                "records": distributed.merge_records([p[0] for p in parts]),
                "counts": distributed.merge_counts([p[1] for p in parts]),
                "world_size": distributed.world_size(),
            }
            with open(out, "w") as f:
                json.dump(merged, f)
        if fail:
            distributed.barrier()
            if distributed.rank() == 1:
                print(f"raising at {time.time()}", flush=True)
                raise ValueError("rank one cannot go on")
            distributed.barrier()  # rank 1 never arrives


if __name__ == "__main__":
    main(sys.argv[1], "--fail" in sys.argv)
