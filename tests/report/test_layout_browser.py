"""Reports read at a laptop's width: no sideways scrolling, wide tables in their own box, no crowded ticks,
and a "What we found" list at the top whose every line leads to its section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.report import Report, figures
from interp.report.ticks import overlapping_tick_labels

pytestmark = pytest.mark.browser


def crowded_report(out) -> Report:
    report = Report(out, "Layout")
    report.add_section("Behaviour")
    wide = pd.DataFrame(
        {f"column_with_a_long_name_{i}": np.linspace(0, 1, 5) + i for i in range(24)}
        | {"sentence": ["The animal did not cross the street because it was too tired " * 3] * 5}
    )
    report.add_table("wide", wide)
    report.add_section("Probes")
    report.add_figure("probe", figures.line_plot(list(range(31)), {"accuracy": np.linspace(0.4, 0.9, 31)}))
    report.add_figure("heads", figures.heatmap_layer_head(np.random.default_rng(0).random((30, 9)), title="t",
                                                          cbar_label="c"))  # fmt: skip
    report.add_finding("The model resolves the pronoun: **0.72** [0.66, 0.77].", "Behaviour")
    report.add_finding("A probe reads the referent after layer 20.", "Probes")
    return report


def test_thirty_layer_labels_are_thinned_until_none_crowd():
    fig = figures.line_plot(list(range(31)), {"accuracy": np.linspace(0.4, 0.9, 31)})
    assert len(overlapping_tick_labels(fig)) > 10  # the control: 31 labels on 6 inches do crowd
    report = Report("unused", "t")
    report.add_figure("probe", fig)
    assert overlapping_tick_labels(fig) == []
    shown = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert shown[:3] == ["0", "2", "4"] and shown[-1] == "30"
    assert fig.get_size_inches()[1] <= 8.0  # and heatmaps of 30 layers stay within a screen
    assert (
        figures.heatmap_layer_head(np.zeros((30, 9)), title="t", cbar_label="c").get_size_inches()[1] <= 8.0
    )


def test_a_crowded_report_reads_at_laptop_width(tmp_path, browser):
    browser.open_file(crowded_report(tmp_path / "r").write() / "index.html")
    assert browser.layout_problems() == []
    assert browser.js("return document.querySelector('main').children[1].id;") == "findings"
    links = browser.js(
        "return [...document.querySelectorAll('#findings a')].map(a => [a.textContent,"
        " document.getElementById(a.getAttribute('href').slice(1)).querySelector('h2').textContent]);"
    )
    assert links == [["Behaviour", "Behaviour"], ["Probes", "Probes"]]
    assert browser.js("return document.querySelector('#findings strong').textContent;") == "0.72"
    assert browser.js("return document.querySelector('#toc a').textContent;") == "What we found"
    wrap = browser.js(
        "var w = document.querySelector('#tab-wide .table-wrap'); return [w.scrollWidth, w.clientWidth];"
    )
    assert wrap[0] > wrap[1]  # the wide table scrolls inside its own box
    browser.screenshot("layout_crowded_report")


def test_the_layout_check_sees_a_page_that_overflows(tmp_path, browser):
    page = tmp_path / "wide.html"
    page.write_text("<!doctype html><title>w</title><main><div id='slab' style='width:3000px'>x</div></main>")
    browser.open_file(page)
    problems = browser.layout_problems()
    assert any("the page is" in p for p in problems) and any("id=slab" in p for p in problems)


def test_a_finding_that_links_nowhere_is_refused(tmp_path):
    report = Report(tmp_path / "r", "t")
    report.add_section("Behaviour")
    report.add_finding("Something.", "Probes")
    with pytest.raises(ValueError, match="finding links to section 'Probes'.*sections are \\['Behaviour'\\]"):
        report.write()
