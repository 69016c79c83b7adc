"""What a dashboard pass holds, measured in a fresh process: ``python -m tests.sae.dashboards.memory_probe ITEMS``.

A tiny model with transcoders of 2,048 features at each of its 2 layers reads ``ITEMS`` items of 63 tokens in
batches of 32, so each batch's activations are 16 MiB a layer while the tables are 10 MiB. After a warm-up pass
(first-use costs) and with the heap's free pages handed back, three things are read once the tables are made and
after each batch of the pass: the resident set (``/proc/self/statm``, memory backed by no file), read between
batches, where nothing is under way; the bytes live in glibc's heap and its own mappings (``mallinfo2``: ``uordblks
+ hblkhd``), exact at the moment read; and the bytes Python's own allocations hold (``tracemalloc``, started with
the pass). One JSON line: ``start`` and ``batches``, each ``[resident, live, python]`` in MiB.
"""

from __future__ import annotations

import ctypes
import json
import resource
import sys
import tracemalloc

import torch

MIB = 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")
    ]  # fmt: skip


def mallinfo2():
    """glibc's ``mallinfo2`` (2.33 or later), or ``None`` elsewhere."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _Mallinfo2
    return fn


def resident() -> int:
    """The resident set backed by no file (``/proc/self/statm``: resident less shared), in bytes."""
    with open("/proc/self/statm") as f:
        fields = f.read().split()
    return (int(fields[1]) - int(fields[2])) * resource.getpagesize()


def main(argv: list[str]) -> None:
    from interp.allocator import heap_trim
    from interp.sae.dashboards import Data, Settings, collect
    from interp.sae.dashboards.reading import Reading
    from interp.sae.dashboards.stream import run_pass
    from tests.circuits.transcoders import tiny_transcoders
    from tests.sae.dashboards import helpers

    torch.set_num_threads(1)
    n_items, info = int(argv[0]), mallinfo2()
    model = helpers.model()
    tc = tiny_transcoders(model.cfg, d_transcoder=2048, seed=7)
    with torch.no_grad():
        tc.b_enc.sub_(1.5)  # about 2% of the features fire at a token
    g = torch.Generator().manual_seed(0)
    texts = [" ".join(f"w{int(t)}" for t in row) for row in torch.randint(3, 64, (n_items, 62), generator=g)]
    settings = Settings(top=4, quantiles=3, per_quantile=2, sample=10, before=3, after=2)
    collect(model, tc, Data(texts=texts[:32], batch_size=32), settings=settings)  # warm-up

    def counts() -> list[float]:
        m = info()
        python = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        return [resident() / MIB, (m.uordblks + m.hblkhd) / MIB, python / MIB]

    reading = Reading.of(tc, None, model)
    source = Data(texts=texts, batch_size=32).open(model, reading)
    collector = reading.collector(settings)
    heap_trim()(0)  # the start holds nothing freed: what the pass keeps is its own
    start, batches = counts(), []
    tracemalloc.start()
    run_pass(
        collector, reading.dictionary, source.batches({}), after_batch=lambda _: batches.append(counts())
    )
    tracemalloc.stop()
    table = sum(t.numel() * t.element_size() for t in collector.state().values()) / MIB
    print(json.dumps({"n_tokens": collector.n_tokens, "table": table, "start": start, "batches": batches}))


if __name__ == "__main__":
    main(sys.argv[1:])
