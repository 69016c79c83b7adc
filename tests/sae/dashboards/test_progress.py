"""A run says what each phase does, and its bars end at their real totals: ``--tokens`` past the data's end is
not a total, and writing the files has a bar of its own."""

from __future__ import annotations

import re

import pytest

from interp.sae.dashboards import Data, Settings, write_dashboards
from interp.sae.dashboards.sources import special_first
from tests.sae.dashboards import helpers

SETTINGS = Settings(top=3, quantiles=2, per_quantile=1, sample=6, before=2, after=1)


@pytest.fixture(scope="module")
def model():
    return helpers.model()


def _finals(err: str) -> dict[str, str]:
    """Each bar's last state, by its label (tqdm redraws a bar on one line with carriage returns)."""
    states = [part.strip() for line in err.splitlines() for part in line.split("\r") if part.strip()]
    return {m[1]: m[2] for s in states if (m := re.match(r"(tokenize|pass|files):\s+\d+%\|.*?\| (\S+)", s))}


def test_each_phase_has_a_heading_and_a_bar_that_ends_at_its_real_total(model, tmp_path, capsys):
    texts = helpers.texts(30)
    tokens = sum(int(special_first(model.tokenizer, [t])[1].sum()) for t in texts)  # with each special token
    tc = helpers.dictionary("per-layer", model)
    done = write_dashboards(
        model, tc, tmp_path, Data(texts=texts, max_tokens=1_000_000, batch_size=8), scan="tc", settings=SETTINGS,
        progress=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    headings = [line for line in err.splitlines() if line.startswith("dashboards: ")]
    assert headings == [
        "dashboards: tokenizing 30 items to fingerprint them and count their tokens",
        f"dashboards: reading {tokens:,} tokens through 32 features at layers 0, 1",
        f"dashboards: writing 32 feature files to {done.folder}",
    ]
    assert _finals(err) == {"tokenize": "4/4", "pass": f"{tokens}/{tokens}", "files": "32/32"}


def test_a_continued_run_says_where_it_continues_and_its_bar_starts_there(model, tmp_path, capsys):
    texts = helpers.texts(30)
    tc = helpers.dictionary("per-layer", model)

    def run(**kwargs):
        return write_dashboards(
            model, tc, tmp_path, Data(texts=texts, batch_size=8), scan="tc", settings=SETTINGS, **kwargs
        )

    def stop(batch):
        if batch.progress["batch"] == 2:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        run(checkpoint_seconds=0.0, after_batch=stop)
    capsys.readouterr()
    assert run(progress=True).state == "resume"
    err = capsys.readouterr().err
    assert re.search(
        r"dashboards: reading [\d,]+ tokens through 32 features at layers 0, 1, continuing after \d+", err
    )
