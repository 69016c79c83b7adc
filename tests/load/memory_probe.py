"""Peak resident memory of one step, measured in a fresh process (``python -m tests.load.memory_probe``).

Each measurement runs alone: the probe imports what it needs, optionally loads and runs a tiny model the same
way (so that libraries' first-use costs are paid), notes its resident set, then loads the folder and either
reads every weight once or runs one forward pass, and prints one JSON line with the peak above that baseline.
For a forward pass the peak is restarted once loading is done, so it counts what the model holds resident
plus what the pass adds, not the pages that loading passed through. The folders are written by the test first,
so writing them costs nothing here.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys

import torch


def resident_bytes() -> int:
    """The resident set now (``/proc/self/statm``), in bytes."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize()


def peak_bytes() -> int:
    """The peak resident set of this process so far (``VmHWM``), in bytes.

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over from the parent across ``fork`` and ``exec``, so
    a probe started by a large test process would report the parent's peak.
    """
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def reset_peak() -> None:
    """Start ``VmHWM`` again from the resident set now (Linux's ``clear_refs`` code 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--step", choices=("load", "forward"), default="load")
    parser.add_argument("--device-map", default=None, help="a JSON object: module -> device")
    parser.add_argument("--offload-folder", default=None)
    parser.add_argument("--warmup", default=None, help="a tiny folder loaded and run the same way first")
    parser.add_argument("--dtype", default=None, help="the dtype to load in (default: float32)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import interp

    tokens = torch.tensor([[1, 2, 3, 4]])
    device_map = json.loads(args.device_map) if args.device_map else None
    kwargs = {"device_map": device_map, "offload_folder": args.offload_folder} if device_map else {}
    kwargs["dtype"] = args.dtype
    if args.warmup:  # libraries' first-use costs (lazy imports, allocator pools) are not the model's
        with torch.no_grad():
            interp.load(args.warmup, **kwargs)(tokens)
    gc.collect()
    reset_peak()
    before = resident_bytes()
    model = interp.load(args.folder, **kwargs)
    if args.step == "load":
        for param in model.parameters():  # read every weight once: memory-mapped pages become resident
            param.detach().sum()
    else:  # the forward's peak, counting what the model holds resident but not what loading passed through
        gc.collect()
        reset_peak()
        with torch.no_grad():
            model(tokens)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    print(
        json.dumps({"before": before, "peak": peak_bytes(), "extra": peak_bytes() - before, "params": params})
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
