"""``interp dashboards MODEL --dictionary PATH (--data FILE | --store DIR) --out DIR``: every feature's dashboard.

Everything that can be checked before the model loads is checked first, each in one line: the output folder,
the dictionary's path, the data file (every line) or the store (an activation store of every position), the
scan name, the feature list, the numbers, the device and the dtype. With the model: that the dictionary fits
it, that the store holds the dictionary's input hooks and was written by this model, and that ``OUT`` holds no
other run's dashboards under this scan, all before the pass. A store is checked by
:func:`interp.preflight.check_store`, the pass and the files are :func:`interp.sae.dashboards.write_dashboards`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.arguments import add_command, add_device_arguments, non_negative_int, positive_int

EXAMPLE = "interp dashboards smollm2-135m --dictionary tc/ --data texts.txt --out run/ --tokens 200000"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``interp dashboards`` to the subcommands."""
    p = add_command(
        sub,
        "dashboards",
        summary="dashboards of every feature of a dictionary, as circuit-tracer's feature files",
        description=(
            "One pass over a corpus (run through the model) or an activation store: for every feature of an SAE\n"
            "or transcoders, its top examples and examples from each quantile of its activations (each with\n"
            "the activation at every token around it), its histogram, density and range, and the tokens its\n"
            "decoder promotes and suppresses. Writes OUT/features/SCAN/<featureIndex>.json (circuit-tracer's\n"
            "schema), index.json and index.html, a page to browse them. A run that stops continues when the\n"
            "same command is run again. Link a graph to them with interp attribute ... --dashboards OUT."
        ),
        example=EXAMPLE,
    )
    p.add_argument("model", help="packaged name, Hugging Face folder or .gguf file")
    p.add_argument("--dictionary", required=True, help="an SAE folder or file, or a transcoders folder")
    data = p.add_mutually_exclusive_group(required=True)
    data.add_argument(
        "--data",
        help="a text file (one item a line) or JSONL with 'text', each item its own sequence; this or --store "
        "(required)",
    )
    data.add_argument(
        "--store",
        help="an activation store of the dictionary's input hooks (interp cache); this or --data (required)",
    )
    p.add_argument("--out", required=True, help="the folder to write (a graph's folder, to link them)")
    p.add_argument(
        "--scan", default=None, help="the dictionary's name under OUT/features/ (default: its folder's name)"
    )
    p.add_argument("--tokens", type=positive_int, default=None, help="read the first N tokens (default: all)")
    p.add_argument(
        "--features",
        default=None,
        help="LAYER:FEATURE pairs, comma separated, such as 3:17,5:2 (default: all)",
    )
    p.add_argument("--batch-size", type=positive_int, default=16, help="items per forward pass")
    p.add_argument("--top", type=positive_int, default=10, help="top examples per feature")
    p.add_argument("--quantiles", type=positive_int, default=5, help="quantile groups of the activations")
    p.add_argument("--per-quantile", type=positive_int, default=4, help="examples per quantile group")
    p.add_argument(
        "--sample", type=positive_int, default=50, help="the uniform sample quantile examples are drawn from"
    )
    p.add_argument("--before", type=non_negative_int, default=16, help="tokens of context before an example")
    p.add_argument("--after", type=non_negative_int, default=4, help="tokens of context after an example")
    p.add_argument("--seed", type=non_negative_int, default=0, help="chooses the sample")
    p.add_argument(
        "--checkpoint-minutes", type=float, default=5.0, help="how often the pass is saved for a rerun"
    )
    add_device_arguments(p)
    p.set_defaults(fn=run)


def check_args(args: argparse.Namespace):
    """Everything about the command that can be checked before the model loads.

    Returns:
        ``(data, settings, features or None, scan, placement)``: the :class:`~interp.sae.dashboards.Data` read,
        what is kept, the features chosen, the scan's name and ``interp.load``'s placement keywords.
    """
    from interp.feature_id import FeatureId
    from interp.preflight import check_command, check_output_folder, check_owned, check_placement, check_store
    from interp.sae.dashboards import Data, Settings
    from interp.sae.dashboards.folder import RUN, check_scan, default_scan

    placement = check_placement(args)
    check_output_folder(args.out, flag="--out")
    check_command(device=args.device, dtype=args.dtype, model=args.model, data=args.data)
    dictionary = Path(args.dictionary).expanduser()
    if not dictionary.exists():
        raise FileNotFoundError(
            f"--dictionary {dictionary} does not exist; give an SAE or transcoders folder"
        )
    if args.data is not None:
        from interp.store import read_items

        data = Data(texts=read_items(args.data), max_tokens=args.tokens, batch_size=args.batch_size)
    else:
        data = Data(store=check_store(args.store, flag="--store"), max_tokens=args.tokens)
    if not args.checkpoint_minutes > 0:
        raise ValueError(
            f"--checkpoint-minutes {args.checkpoint_minutes}: it must be more than 0, such as 5 (the default)"
        )
    settings = Settings(
        top=args.top,
        quantiles=args.quantiles,
        per_quantile=args.per_quantile,
        sample=args.sample,
        before=args.before,
        after=args.after,
        seed=args.seed,
    )
    features = None if args.features is None else FeatureId.parse_list(args.features, "--features")
    scan = check_scan(args.scan) if args.scan is not None else default_scan(dictionary)
    root = Path(args.out).expanduser() / "features" / scan  # the folder's part that is the run's
    check_owned(root, None, (root / RUN).is_file(), flag="--out", command="interp dashboards", record=RUN)
    return data, settings, features, scan, placement


def run(args: argparse.Namespace) -> int:
    """Check the command, load the model and the dictionary, check they fit, then write the dashboards."""
    from interp.load import load
    from interp.sae.dashboards import load_dictionary, write_dashboards

    data, settings, features, scan, placement = check_args(args)
    model = load(args.model, device=args.device, dtype=args.dtype, **placement)
    dictionary = load_dictionary(args.dictionary, model)
    done = write_dashboards(
        model,
        dictionary,
        args.out,
        data,
        scan=scan,
        settings=settings,
        features=features,
        checkpoint_seconds=60 * args.checkpoint_minutes,
        progress=not args.quiet,
    )
    if done.state == "complete":
        print(f"{done.folder}: these dashboards are already complete; nothing to do")
        return 0
    s = done.seconds
    resumed = " (continued from its checkpoint)" if done.state == "resume" else ""
    print(
        f"{done.folder}: dashboards of {done.n_features} features over {done.n_tokens:,} tokens{resumed}; "
        f"pass {s['pass']:.1f} s, files {s['records']:.1f} s; open {done.folder / 'index.html'}"
    )
    if done.n_dead:
        print(
            f"{done.n_dead} of {done.n_features} features never fired in these {done.n_tokens:,} tokens: their "
            "dashboards hold no example, so there is nothing to explain; they are dead, or too rare for this "
            "much text (a larger --data, or --tokens, shows which)"
        )
    return 0
