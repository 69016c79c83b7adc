"""The one report writer every study uses.

A study creates a :class:`Report`, adds prose, figures, tables, key numbers and results in reading order, and
calls :meth:`Report.write` once at the end. Nothing touches the disk before then, and ``write`` builds the
whole report in a temporary sibling folder and renames it into place, so a study that crashes never leaves
half a report.

A report owns what it writes at the top of its folder, :data:`REPORT_ENTRIES`; anything else there is the
user's. Rewriting a report replaces the earlier report's entries and keeps every other file: a folder with
nothing else in it is swapped whole (two renames), a folder with the user's files in it entry by entry
(``figures/`` and ``tables/`` one rename each, ``manifest.json`` last). :func:`check_report_folder` refuses,
before any work, a place that cannot take a report: a file, a file of the user's of a name the report writes
(at the top, or inside ``figures/`` or ``tables/``: it would be lost), or a place that cannot be written.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from interp.preflight import check_owned
from interp.report.blocks import (
    Block,
    FigureBlock,
    Headline,
    HtmlBlock,
    SectionBlock,
    TableBlock,
    TextBlock,
    check_name,
)
from interp.report.manifest import build_manifest, input_record, normalise_dtype, sha256_file
from interp.report.page import render_page
from interp.report.schema import RESULTS_SCHEMA, validate_manifest, validate_results
from interp.report.serialize import dumps_deterministic, to_jsonable
from interp.report.ticks import overlapping_tick_labels, thin_tick_labels

MAX_FIGURE_PX = 2400
"""Longest side of a figure in pixels; a larger figure is saved at a lower dpi."""

HTML_WARN_BYTES = 20 * 2**20
"""``write`` warns when ``index.html`` grows past this: keep top-k entries or round to float16 instead."""

REPORT_ENTRIES = ("figures", "tables", "results.json", "index.html", "manifest.json")
"""What a report writes at the top of its folder, in the order a rewrite puts them in place."""


class Report:
    """A report folder under construction.

    Example:
        >>> report = Report("reports/heads", "Induction heads", seed=0, config={"n_items": 64})
        >>> report.add_section("Hypothesis")
        >>> report.add_text("Heads that attend to the token after an earlier copy of the current one.")
        >>> report.add_headline("heads found", 3, note="score > 0.5")
        >>> report.add_results({"scores": [[0.1, 0.9]]})
        >>> report.write()  # doctest: +SKIP

    Args:
        out_dir: The report folder. ``write`` replaces an earlier report there and keeps the user's other
            files (see :func:`check_report_folder`).
        title: Title of the page and of ``results.json``.
        subtitle: A line under the title, such as the question the study asks.
        command: The command line to record; ``None`` records ``sys.argv``. A string is split like a shell.
        seed: The seed the study used, recorded in the manifest and shown in the page.
        config: The study's settings (a dict or a dataclass), recorded in the manifest and shown in the page.
        model: The model's name, such as ``"smollm2-135m"``.
        model_path: The model's file or folder; it is hashed now, in chunks.
        data_paths: Data files the study read; each is hashed now.
        device: Where the study ran (``"cpu"``, ``"cuda:0"``, a ``torch.device``).
        dtype: The model's dtype (``"float32"`` or a ``torch.dtype``).
        started: ``time.perf_counter()`` when the run began; the manifest's ``wall_time_s`` counts from it
            (default: from the report's creation).
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        title: str,
        *,
        subtitle: str | None = None,
        command: Sequence[str] | str | None = None,
        seed: int | None = None,
        config: Any = None,
        model: str | None = None,
        model_path: str | os.PathLike[str] | None = None,
        data_paths: Sequence[str | os.PathLike[str]] = (),
        device: Any = None,
        dtype: Any = None,
        started: float | None = None,
    ) -> None:
        self._start = time.perf_counter() if started is None else started
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"a report needs a non-empty title, got {title!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
        self.out_dir = Path(out_dir)
        self.title = title
        self.subtitle = subtitle
        self.command = (
            shlex.split(command)
            if isinstance(command, str)
            else list(sys.argv if command is None else command)
        )
        self.seed = seed
        self.config: dict[str, Any] = to_jsonable({} if config is None else config, _path="config")
        if not isinstance(self.config, dict):
            raise TypeError(f"config must be a mapping or a dataclass, got {type(config).__name__}")
        self.model = None
        if model is not None or model_path is not None:
            record = input_record(model_path) if model_path is not None else {"path": None, "sha256": None}
            record.setdefault("bytes", None)
            self.model = {"name": model, **record}
            described = _packaged_description(model)
            if described is not None:
                self.model["description"] = described
        self.data = [input_record(p) for p in data_paths]
        self.device = None if device is None else str(device)
        self.dtype = normalise_dtype(dtype)
        self.results: dict[str, Any] = {}
        self.headline: dict[str, Headline] = {}
        self.findings: list[tuple[str, str]] = []
        self._blocks: list[Block] = []
        self._names: dict[str, set[str]] = {"figure": set(), "table": set(), "html": set()}
        self._css: list[str] = []
        self._js: list[str] = []

    # -- content, in reading order -------------------------------------------------------------------------

    def add_section(self, title: str, text: str | None = None) -> None:
        """Start a section (listed in the page's navigation), optionally with its first paragraphs."""
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"a section needs a non-empty title, got {title!r}")
        n = sum(isinstance(b, SectionBlock) for b in self._blocks) + 1
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40]
        self._blocks.append(SectionBlock(title, f"s{n}-{slug}" if slug else f"s{n}"))
        if text is not None:
            self.add_text(text)

    def add_text(self, text: str) -> None:
        """Add prose: paragraphs split by blank lines, ``- `` bullets, ``code``, ``**strong**``; escaped."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._blocks.append(TextBlock(text))

    def add_figure(self, name: str, fig: Figure, *, caption: str | None = None, dpi: int = 110) -> None:
        """Render a matplotlib figure now to ``figures/NAME.png`` (inlined in the page) and close it.

        Tick labels that would overlap are thinned first (:func:`interp.report.ticks.thin_tick_labels`).

        The PNG carries no timestamp or software metadata, so the same figure gives the same bytes.
        """
        self._claim(name, "figure")
        if not isinstance(fig, Figure):
            raise TypeError(f"figure {name!r} must be a matplotlib Figure, got {type(fig).__name__}")
        thin_tick_labels(fig)  # labels that would print over each other keep every n-th one
        crowded = tuple(overlapping_tick_labels(fig))
        width_in, height_in = fig.get_size_inches()
        pad = 0.1  # inches of margin around the tight bounding box
        dpi = min(dpi, MAX_FIGURE_PX / (max(width_in, height_in) + 2 * pad))
        buf = io.BytesIO()
        fig.savefig(
            buf, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight", pad_inches=pad
        )
        if "matplotlib.pyplot" in sys.modules:  # release figures made with pyplot; plain Figures need nothing
            sys.modules["matplotlib.pyplot"].close(fig)
        self._blocks.append(FigureBlock(name, buf.getvalue(), caption, int(width_in * dpi), crowded))

    def add_table(
        self,
        name: str,
        frame: pd.DataFrame,
        *,
        caption: str | None = None,
        max_rows: int = 100,
        digits: int | Mapping[str, int] = 4,
        index: bool | None = None,
    ) -> None:
        """Add a table: all rows to ``tables/NAME.csv``, the first ``max_rows`` to the page.

        Args:
            name: File name stem and anchor (``tab-NAME``).
            frame: The table. It is copied, so later changes to it do not show.
            caption: Text above the table.
            max_rows: Rows shown in the page; a note links to the CSV for the rest.
            digits: Significant digits of floats in the page, also inside cells holding lists (the CSV keeps
                6); a mapping gives them per column (others get 4), e.g. ``{"p": 2, "accuracy": 3}``.
            index: Whether to write the index; by default only when it is not a plain 0..n-1 range.
        """
        self._claim(name, "table")
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"table {name!r} must be a pandas DataFrame, got {type(frame).__name__}")
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        per_column = digits.values() if isinstance(digits, Mapping) else [digits]
        if not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= 17 for d in per_column):
            raise ValueError(
                f"table {name!r}: digits must be an int from 1 to 17 (or a mapping of them), got {digits!r}"
            )
        if isinstance(digits, Mapping):
            unknown = sorted(map(str, set(digits) - set(frame.columns)))
            if unknown:
                raise ValueError(f"table {name!r}: digits name columns {unknown} that it does not have")
        if index is None:
            index = not (
                isinstance(frame.index, pd.RangeIndex) and frame.index.start == 0 and frame.index.step == 1
            )
        self._blocks.append(TableBlock(name, frame.copy(), caption, max_rows, digits, index))

    def add_headline(
        self,
        label: str,
        value: Any,
        *,
        ci: tuple[float, float] | None = None,
        unit: str | None = None,
        note: str | None = None,
    ) -> None:
        """Add a key number to the box at the top of the page and to ``results.json``'s ``headline``.

        Args:
            label: What the number is, such as ``"accuracy"``.
            value: A number (rounded to 6 significant digits), a string or a bool.
            ci: A confidence interval ``(low, high)``; say its level in ``note``.
            unit: Shown after the value, such as ``"nats"``.
            note: A short line under it, such as ``"95% bootstrap CI, 1000 resamples"``.
        """
        if label in self.headline:
            raise ValueError(f"headline {label!r} was already added")
        value = to_jsonable(value, _path=f"headline[{label!r}]")
        if isinstance(value, (list, dict)):
            raise TypeError(
                f"headline {label!r} must be a single number or string, got {type(value).__name__}"
            )
        if ci is not None:
            ci = tuple(to_jsonable(list(ci), _path=f"headline[{label!r}].ci"))
            if len(ci) != 2:
                raise ValueError(f"headline {label!r}: ci must be (low, high), got {ci!r}")
        self.headline[label] = Headline(value, ci, unit, note)

    def add_finding(self, text: str, section: str) -> None:
        """Add a line to "What we found", the list that opens the page, linked to the section that shows it.

        Findings are usually known only once every section is written, so they may be added at any time;
        the page puts them first, under the key numbers.

        Args:
            text: One sentence: what was found (or not), with its number (``code`` and ``**strong**`` work).
            section: The title of the section with the evidence, as given to :meth:`add_section`.

        Raises:
            ValueError: Empty text; a section that does not exist is refused when the report is written.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"a finding needs a sentence, got {text!r}")
        self.findings.append((text, section))

    def add_results(self, results: Mapping[str, Any]) -> None:
        """Merge entries into ``results.json``'s ``results``; a key added twice raises, never overwrites."""
        clash = sorted(set(results) & set(self.results))
        if clash:
            raise ValueError(f"results already hold {clash}; pick new keys or edit report.results directly")
        self.results.update(results)

    def add_html(
        self, name: str, fragment: str, *, trusted: bool, css: str | None = None, js: str | None = None
    ) -> None:
        """Insert an HTML fragment built by the project's own code, such as the attention viewer.

        The fragment goes into the page unchanged, so its builder must escape every string it embeds:
        ``html.escape`` for markup and attributes, :func:`interp.report.json_for_script` for data in a
        ``<script>``. Untrusted HTML is refused; pass such text to :meth:`add_text`, which escapes it.

        Args:
            name: Anchor of the widget (``html-NAME``).
            fragment: The markup.
            trusted: Must be ``True``: the caller states that the fragment escapes its own data.
            css: A stylesheet the fragment needs; identical stylesheets are included once per page.
            js: A script run after the page content; identical scripts are included once per page.
        """
        if trusted is not True:
            raise ValueError(
                f"html block {name!r}: only trusted fragments are inserted; escape the data with "
                "html.escape and json_for_script, then pass trusted=True"
            )
        self._claim(name, "html")
        self._blocks.append(HtmlBlock(name, fragment))
        if css:
            self._css.append(css)
        if js:
            self._js.append(js)

    def _claim(self, name: str, kind: str) -> None:
        check_name(name, kind)
        if name in self._names[kind]:
            raise ValueError(f"{kind} {name!r} was already added to this report")
        self._names[kind].add(name)

    # -- output ----------------------------------------------------------------------------------------------

    def results_dict(self) -> dict[str, Any]:
        """The content of ``results.json``: title, headline, figure and table files, and the results."""
        figures = {b.name: b.path for b in self._blocks if isinstance(b, FigureBlock)}
        tables = {
            b.name: {"csv": b.path, "rows": len(b.frame), "columns": b.columns()}
            for b in self._blocks
            if isinstance(b, TableBlock)
        }
        headline = {
            k: {"value": h.value, "ci": None if h.ci is None else list(h.ci), "unit": h.unit, "note": h.note}
            for k, h in self.headline.items()
        }
        out = {
            "schema": RESULTS_SCHEMA,
            "title": self.title,
            "headline": headline,
            "figures": figures,
            "tables": tables,
            "results": self.results,
        }
        return to_jsonable(out, _path="results")

    def write(self) -> Path:
        """Write the report folder in one go and return its path.

        Raises:
            FileExistsError: ``out_dir`` is a file, holds files but no earlier report, or holds files of the
                user's inside ``figures/`` or ``tables/``; see :func:`check_report_folder`.
            PermissionError: ``out_dir`` cannot be created or written.
            ReportSchemaError: If the results or manifest do not validate (a bug in the caller's values).
        """
        results = self.results_dict()
        validate_results(results)
        kept = check_report_folder(self.out_dir)
        self.out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.out_dir.name}.", suffix=".tmp", dir=self.out_dir.parent))
        try:
            os.chmod(tmp, 0o755)
            self._write_files(tmp, results)
            if kept:
                _replace_entries(tmp, self.out_dir)
            else:
                _replace_dir(tmp, self.out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.out_dir

    def _linked_findings(self) -> list[tuple[str, str, str]]:
        """``(text, section title, anchor)`` for each finding; a section that is not there is an error."""
        anchors = {b.title: b.anchor for b in self._blocks if isinstance(b, SectionBlock)}
        missing = [section for _, section in self.findings if section not in anchors]
        if missing:
            raise ValueError(
                f"finding links to section {missing[0]!r}, which the report does not have; its sections are "
                f"{list(anchors)}"
            )
        return [(text, section, anchors[section]) for text, section in self.findings]

    def _write_files(self, root: Path, results: dict[str, Any]) -> None:
        for block in self._blocks:
            if isinstance(block, FigureBlock):
                _write(root / block.path, block.png)
            elif isinstance(block, TableBlock):
                _write(root / block.path, block.csv().encode("utf-8"))
        _write(root / "results.json", dumps_deterministic(results).encode("utf-8"))
        provenance = {
            "model": self.model,
            "data": self.data,
            "seed": self.seed,
            "device": self.device,
            "dtype": self.dtype,
            "command": self.command,
            "config": self.config,
        }
        manifest_static = build_manifest(
            title=self.title,
            wall_time_s=0.0,
            files={},
            **provenance,  # times are replaced below
        )
        page = render_page(
            title=self.title,
            subtitle=self.subtitle,
            headline=self.headline,
            findings=self._linked_findings(),
            blocks=self._blocks,
            provenance={k: manifest_static[k] for k in (*provenance, "versions", "source")},
            results=results,
            extra_css=self._css,
            extra_js=self._js,
        )
        html_bytes = page.encode("utf-8")
        if len(html_bytes) > HTML_WARN_BYTES:
            warnings.warn(
                f"report {self.title!r}: index.html is {len(html_bytes) / 2**20:.1f} MiB; keep the top-k "
                "entries or fewer rows in the page (the CSVs keep everything)",
                stacklevel=3,
            )
        _write(root / "index.html", html_bytes)
        files = {
            p.relative_to(root).as_posix(): sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()
        }
        manifest = {
            **manifest_static,
            "wall_time_s": round(time.perf_counter() - self._start, 3),
            "files": files,
        }
        validate_manifest(manifest)
        _write(root / "manifest.json", dumps_deterministic(manifest).encode("utf-8"))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def check_report_folder(out_dir: str | os.PathLike[str]) -> list[str]:
    """Check that a report can be written to ``out_dir``, touching nothing there; return the user's entries.

    A report follows every command's rule for its output folder (:func:`interp.preflight.check_owned`): it
    replaces only what an earlier report there wrote (what its ``manifest.json`` lists) and refuses, by name,
    any other file of a name it writes (:data:`REPORT_ENTRIES`, and whatever is inside ``figures/`` and
    ``tables/``), which a rewrite would replace or delete. The other entries of the folder are the user's: a
    rewrite keeps them, and they are returned.

    Raises:
        FileExistsError: ``out_dir`` is a file; or it holds an entry of a name the report writes that no earlier
            report there wrote (the message names the files), or a ``manifest.json`` that is not a report's.
        NotADirectoryError: A parent of ``out_dir`` is a file.
        PermissionError: Nothing can be created where the report would go.
    """
    out_dir = Path(out_dir)
    where = f"cannot write a report to {str(out_dir)!r}"
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{where}: it is a file; pass a folder (new, empty, or an earlier report)")
    if not out_dir.exists():
        parent = out_dir.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise NotADirectoryError(f"{where}: {str(parent)!r} is a file, so no folder can be made under it")
        _probe_writable(parent, where)
        return []
    entries = sorted(p.name for p in out_dir.iterdir())
    if not entries:
        _probe_writable(out_dir.parent, where)
        return []
    manifest = out_dir / "manifest.json"
    listed = {*_manifest_files(manifest, where), manifest.name} if manifest.is_file() else set()
    check_owned(out_dir, REPORT_ENTRIES, listed, flag="--out", command="a report", record=manifest.name)
    _probe_writable(out_dir.parent, where)
    kept = [name for name in entries if name not in REPORT_ENTRIES]
    if kept:
        _probe_writable(out_dir, where)
    return kept


def _manifest_files(path: Path, where: str) -> set[str]:
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError) as err:
        raise FileExistsError(
            f"{where}: its manifest.json cannot be read ({err}), so which files are the report's is unknown; "
            "choose a new or empty folder"
        ) from err
    if not isinstance(files, dict):
        raise FileExistsError(
            f"{where}: its manifest.json lists no files, so which files are the report's is unknown; choose "
            "a new or empty folder"
        )
    return set(files)


def _probe_writable(folder: Path, where: str) -> None:
    """Create and remove an empty folder in ``folder``: the one test of writability that root obeys too."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".interp-probe-", dir=folder))
    except OSError as err:
        raise PermissionError(
            f"{where}: cannot create files in {str(folder)!r} ({err.strerror or err}); choose a writable place"
        ) from err


def _replace_dir(new: Path, target: Path) -> None:
    """Move ``new`` to ``target``, replacing an earlier report there with two renames."""
    if not target.exists():
        new.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    old.rmdir()
    target.rename(old)
    try:
        new.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _replace_entries(new: Path, target: Path) -> None:
    """Replace the report entries of ``target`` by those of ``new``, leaving every other entry where it is.

    On an error the entries already moved go back, so ``target`` holds the earlier report again.
    """
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    moved_out: list[str] = []
    moved_in: list[str] = []
    try:
        for name in REPORT_ENTRIES:
            if (target / name).exists() or (target / name).is_symlink():
                (target / name).rename(old / name)
                moved_out.append(name)
        for name in REPORT_ENTRIES:
            if (new / name).exists():
                (new / name).rename(target / name)
                moved_in.append(name)
    except BaseException:
        for name in reversed(moved_in):
            (target / name).rename(new / name)
        for name in reversed(moved_out):
            (old / name).rename(target / name)
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(new, ignore_errors=True)


def _packaged_description(name: str | None) -> str | None:
    """What a packaged model is, exactly (its checkpoint and quantisation), for the manifest; None otherwise."""
    from interp.load.packaged import PACKAGED_MODELS

    return PACKAGED_MODELS[name].description if name in PACKAGED_MODELS else None
