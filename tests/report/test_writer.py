"""The report folder: layout, content, determinism, escaping in the written HTML, and writing in one go."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from interp.report import Report, validate_manifest, validate_results
from interp.report import writer as writer_module
from tests.report.conftest import PAYLOAD


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_folder_layout_and_contents(tmp_path, make_report):
    out = make_report(tmp_path / "report").write()
    assert out == tmp_path / "report"
    assert _files(out) == [
        "figures/scores.png",
        "index.html",
        "manifest.json",
        "results.json",
        "tables/items.csv",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no temporary folder left behind

    results = json.loads((out / "results.json").read_text())
    validate_results(results, required=["scores", "label", "missing"])
    assert results["title"] == f"Test report {PAYLOAD}"
    assert results["results"]["label"] == PAYLOAD
    assert results["results"]["missing"] is None
    assert np.asarray(results["results"]["scores"]).shape == (3, 4)
    assert results["figures"] == {"scores": "figures/scores.png"}
    assert results["tables"] == {
        "items": {"csv": "tables/items.csv", "rows": 150, "columns": ["item", "value", "text"]}
    }
    assert results["headline"]["accuracy"]["ci"] == [0.1, 0.9]
    assert results["headline"][PAYLOAD] == {"value": 3, "ci": None, "unit": PAYLOAD, "note": None}

    manifest = json.loads((out / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["seed"] == 0
    assert manifest["command"] == ["interp", "study", "demo", PAYLOAD]
    assert manifest["config"] == {"n_items": 8, "label": PAYLOAD}
    assert manifest["versions"]["numpy"] == np.__version__
    assert manifest["wall_time_s"] >= 0
    for name, sha in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == sha
    assert set(manifest["files"]) == set(_files(out)) - {"manifest.json"}

    table = pd.read_csv(out / "tables" / "items.csv")
    assert len(table) == 150 and list(table.columns) == ["item", "value", "text"]
    assert (table["text"] == PAYLOAD).all()


def test_png_is_a_png_without_timestamps(tmp_path, make_report):
    png = (make_report(tmp_path / "r").write() / "figures" / "scores.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"tIME" not in png and b"Software" not in png and b"matplotlib" not in png


def test_same_seed_gives_identical_files_except_the_manifest(tmp_path, make_report):
    a = make_report(tmp_path / "a", seed=3).write()
    b = make_report(tmp_path / "b", seed=3).write()
    for name in _files(a):
        if name != "manifest.json":
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = make_report(tmp_path / "c", seed=4).write()
    assert (a / "results.json").read_bytes() != (c / "results.json").read_bytes()


def test_html_escapes_every_user_string(tmp_path, make_report):
    page = (make_report(tmp_path / "r").write() / "index.html").read_text()
    assert "<script>alert(1)" not in page
    assert "<img src=x" not in page
    assert 'onerror="window.__pwned' not in page
    # only the page's own script elements close
    assert page.count("</script>") == page.count("<script") == 2
    assert re.search(r"<title>Test report &lt;script&gt;alert\(1\)&lt;/script&gt;", page)


def test_html_is_self_contained(tmp_path, make_report):
    page = (make_report(tmp_path / "r").write() / "index.html").read_text()
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    assert not re.search(r"""<(link|script|img|iframe)[^>]+(src|href)=["'](?!data:)""", page)
    assert "Content-Security-Policy" in page
    assert 'src="data:image/png;base64,' in page


def test_table_is_truncated_in_html_with_a_note(tmp_path, make_report):
    page = (make_report(tmp_path / "r").write() / "index.html").read_text()
    table = page[page.index('id="tab-items"') :]
    table = table[: table.index("</figure>")]
    assert table.count("<tr>") == 26  # header and 25 rows
    assert "Showing the first 25 of 150 rows" in table
    assert '<a href="tables/items.csv">' in table


def test_model_and_data_files_are_hashed(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights" * 1000)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    data = tmp_path / "items.jsonl"
    data.write_text('{"text": "a"}\n')
    report = Report(tmp_path / "r", "T", model="toy", model_path=model, data_paths=[data, folder], seed=1)
    manifest = json.loads((report.write() / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["model"] == {
        "name": "toy",
        "path": str(model),
        "sha256": hashlib.sha256(b"weights" * 1000).hexdigest(),
        "bytes": 7000,
    }
    assert manifest["data"][0]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    listing = f"{hashlib.sha256(b'{}').hexdigest()}  config.json\n"
    assert manifest["data"][1]["sha256"] == hashlib.sha256(listing.encode()).hexdigest()


def test_a_packaged_model_is_named_exactly_in_the_manifest(tmp_path):
    report = Report(tmp_path / "r", "T", model="smollm2-135m", seed=1)
    manifest = json.loads((report.write() / "manifest.json").read_text())
    validate_manifest(manifest)
    assert manifest["model"]["description"].startswith(
        "SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1), dequantized"
    )
    bad = {**manifest, "model": {**manifest["model"], "description": 3}}
    with pytest.raises(ValueError, match="description"):
        validate_manifest(bad)


def test_missing_model_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        Report(tmp_path / "r", "T", model_path=tmp_path / "absent.gguf")


def test_device_dtype_and_command(tmp_path):
    import torch

    report = Report(tmp_path / "r", "T", device=torch.device("cpu"), dtype=torch.bfloat16, command="a 'b c'")
    manifest = json.loads((report.write() / "manifest.json").read_text())
    assert (manifest["device"], manifest["dtype"], manifest["command"]) == ("cpu", "bfloat16", ["a", "b c"])


def test_rewrite_replaces_an_earlier_report(tmp_path, make_report):
    out = make_report(tmp_path / "r").write()
    report = Report(tmp_path / "r", "Second")
    report.write()
    assert _files(out) == ["index.html", "manifest.json", "results.json"]  # the old figure and table went
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_rewrite_keeps_the_users_files(tmp_path, make_report):
    out = make_report(tmp_path / "r").write()
    (out / "notes.md").write_text("mine")
    (out / "extra").mkdir()
    (out / "extra" / "plot.png").write_bytes(b"also mine")
    second = Report(tmp_path / "r", "Second")
    second.add_table("t", pd.DataFrame({"a": [1]}))
    second.write()
    assert _files(out) == [
        "extra/plot.png",
        "index.html",
        "manifest.json",
        "notes.md",
        "results.json",
        "tables/t.csv",
    ]
    assert (out / "notes.md").read_text() == "mine" and (
        out / "extra" / "plot.png"
    ).read_bytes() == b"also mine"
    assert json.loads((out / "results.json").read_text())["title"] == "Second"
    assert set(json.loads((out / "manifest.json").read_text())["files"]) == {
        "index.html",
        "results.json",
        "tables/t.csv",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_rewrite_refuses_user_files_inside_figures_and_tables(tmp_path, make_report):
    out = make_report(tmp_path / "r").write()
    (out / "figures" / "stale.png").write_bytes(b"mine")
    before = {name: (out / name).read_bytes() for name in _files(out)}
    with pytest.raises(FileExistsError, match=r"holds figures/stale.png, which a report did not write"):
        Report(tmp_path / "r", "Second").write()
    assert {name: (out / name).read_bytes() for name in _files(out)} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_a_failed_entry_swap_puts_the_earlier_report_back(tmp_path, make_report, monkeypatch):
    out = make_report(tmp_path / "r").write()
    (out / "notes.md").write_text("mine")
    before = {name: (out / name).read_bytes() for name in _files(out)}
    real_rename = writer_module.Path.rename
    failed = []

    def failing_rename(self, target):  # the new index.html cannot be moved in, once
        if Path(target) == out / "index.html" and self.parent != out and not failed:
            failed.append(self)
            raise OSError("device busy")
        return real_rename(self, target)

    monkeypatch.setattr(writer_module.Path, "rename", failing_rename)
    with pytest.raises(OSError, match="device busy"):
        Report(tmp_path / "r", "Second").write()
    assert failed and ".tmp" in failed[0].parent.name
    assert {name: (out / name).read_bytes() for name in _files(out)} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_a_folder_that_is_not_a_report_keeps_its_files_and_refuses_to_lose_one(tmp_path):
    """The rule every command follows for its output folder: a file of a name the report writes that no
    report wrote is refused and left as it is; the folder's other files are kept beside the report."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "notes.txt").write_text("mine")
    (tmp_path / "r" / "index.html").write_text("my page")
    with pytest.raises(
        FileExistsError,
        match=r"holds index.html, which a report did not write \(there is no manifest.json\); they are left untouched",
    ):
        Report(tmp_path / "r", "T").write()
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["index.html", "notes.txt"]
    (tmp_path / "r" / "index.html").unlink()
    Report(tmp_path / "r", "T").write()
    assert (tmp_path / "r" / "notes.txt").read_text() == "mine" and (
        tmp_path / "r" / "manifest.json"
    ).is_file()


def test_a_crash_while_writing_leaves_the_earlier_report_and_no_debris(tmp_path, make_report, monkeypatch):
    out = make_report(tmp_path / "r").write()
    before = {name: (out / name).read_bytes() for name in _files(out)}

    def crash(self, root, results):
        (root / "index.html").write_text("half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer_module.Report, "_write_files", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        Report(tmp_path / "r", "T").write()
    assert {name: (out / name).read_bytes() for name in _files(out)} == before
    assert [p.name for p in tmp_path.iterdir()] == ["r"]


def test_invalid_arguments_raise_clear_errors(tmp_path):
    report = Report(tmp_path / "r", "T")
    with pytest.raises(ValueError, match="invalid figure name '../x'"):
        report.add_figure("../x", Figure())
    with pytest.raises(TypeError, match="must be a matplotlib Figure"):
        report.add_figure("ok", object())
    report.add_table("t", pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match="table 't' was already added"):
        report.add_table("t", pd.DataFrame({"a": [1]}))
    with pytest.raises(ValueError, match="only trusted fragments"):
        report.add_html("w", "<div></div>", trusted=False)
    report.add_results({"a": 1})
    with pytest.raises(ValueError, match=r"results already hold \['a'\]"):
        report.add_results({"a": 2})
    report.add_headline("h", 1.0)
    with pytest.raises(ValueError, match="headline 'h' was already added"):
        report.add_headline("h", 2.0)
    with pytest.raises(TypeError, match="single number or string"):
        report.add_headline("v", [1, 2])
    with pytest.raises(ValueError, match="non-empty title"):
        Report(tmp_path / "r", " ")
    with pytest.raises(TypeError, match="seed must be an int"):
        Report(tmp_path / "r", "T", seed=1.0)


def test_results_that_cannot_be_json_fail_before_anything_is_written(tmp_path):
    report = Report(tmp_path / "r", "T")
    report.results["bad"] = object()
    with pytest.raises(TypeError, match=r"results\['results'\]\['bad'\]"):
        report.write()
    assert not (tmp_path / "r").exists()


def test_trusted_html_and_its_assets_are_included_once(tmp_path):
    report = Report(tmp_path / "r", "T")
    report.add_html(
        "w1", '<div class="viewer">one</div>', trusted=True, css=".viewer{color:red}", js="var x=1;"
    )
    report.add_html(
        "w2", '<div class="viewer">two</div>', trusted=True, css=".viewer{color:red}", js="var x=1;"
    )
    page = (report.write() / "index.html").read_text()
    assert '<div class="widget" id="html-w1"><div class="viewer">one</div></div>' in page
    assert page.count(".viewer{color:red}") == 1
    assert page.count("<script>var x=1;</script>") == 1


def test_large_figure_is_downscaled(tmp_path):
    report = Report(tmp_path / "r", "T")
    report.add_figure("big", Figure(figsize=(40, 10)), dpi=200)
    png = (report.write() / "figures" / "big.png").read_bytes()
    width = int.from_bytes(png[16:20], "big")
    assert width <= writer_module.MAX_FIGURE_PX


def test_results_too_large_to_embed_stay_in_the_file(tmp_path, monkeypatch):
    from interp.report import page

    monkeypatch.setattr(page, "MAX_EMBEDDED_RESULTS_BYTES", 100)
    report = Report(tmp_path / "r", "T", command=[])
    report.add_results({"big": list(range(100))})
    out = report.write()
    html = (out / "index.html").read_text()
    assert 'id="interp-results"' not in html and "too large to embed" in html
    assert json.loads((out / "results.json").read_text())["results"]["big"] == list(range(100))
    assert json.loads((out / "manifest.json").read_text())["command"] == []


def _unwritable(folder, monkeypatch):
    """Make ``folder`` refuse new files: by its mode, or (as root, whom modes do not stop) by the probe."""
    import os
    import tempfile

    folder.chmod(0o500)
    if os.geteuid() == 0:
        real = tempfile.mkdtemp

        def refuse(*args, dir=None, **kwargs):
            if dir is not None and Path(dir) == folder:
                raise PermissionError(13, "Permission denied", str(folder))
            return real(*args, dir=dir, **kwargs)

        monkeypatch.setattr(tempfile, "mkdtemp", refuse)


@pytest.mark.parametrize(
    ("setup", "error", "message"),
    [
        ("file", FileExistsError, r"it is a file; pass a folder"),
        (
            "not_a_report",
            FileExistsError,
            r"holds results.json, which a report did not write \(there is no mani",
        ),
        ("under_a_file", NotADirectoryError, r"'.*/f' is a file, so no folder can be made under it"),
        ("bad_manifest", FileExistsError, r"its manifest.json cannot be read"),
        ("unwritable", PermissionError, r"cannot create files in '.*/locked' \(Permission denied\)"),
    ],
)
def test_check_report_folder_refuses_unusable_places_in_one_line(
    tmp_path, monkeypatch, setup, error, message
):
    from interp.report import check_report_folder

    out = tmp_path / "r"
    if setup == "file":
        out.write_text("keep")
    elif setup == "not_a_report":
        out.mkdir()
        (out / "a.txt").write_text("keep")
        (out / "results.json").write_text("keep")
    elif setup == "under_a_file":
        (tmp_path / "f").write_text("keep")
        out = tmp_path / "f" / "sub" / "r"
    elif setup == "bad_manifest":
        out.mkdir()
        (out / "manifest.json").write_text("{not json")
    else:
        (tmp_path / "locked").mkdir()
        out = tmp_path / "locked" / "r"
        _unwritable(tmp_path / "locked", monkeypatch)
    before = sorted(
        (p.relative_to(tmp_path).as_posix(), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()
    )
    try:
        with pytest.raises(error, match=message) as caught:
            check_report_folder(out)
        assert "\n" not in str(caught.value)
        with pytest.raises(error, match=message):
            Report(out, "T").write()
    finally:
        if (tmp_path / "locked").exists():
            (tmp_path / "locked").chmod(0o700)
    after = sorted(
        (p.relative_to(tmp_path).as_posix(), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()
    )
    assert after == before


def test_check_report_folder_accepts_new_empty_and_earlier_reports(tmp_path, make_report):
    from interp.report import check_report_folder

    assert check_report_folder(tmp_path / "new" / "deeper") == []
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    assert check_report_folder(tmp_path / "empty") == []
    out = make_report(tmp_path / "r").write()
    assert check_report_folder(out) == []
    (out / "notes.md").write_text("mine")
    assert check_report_folder(out) == ["notes.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "r"]


def test_tables_round_floats_inside_lists_and_per_column(tmp_path):
    frame = pd.DataFrame(
        {
            "scores": [[-70.3240966796875, -74.39200592041016], [1.0, None]],
            "vector": [np.array([0.123456789, 2.0]), np.array([np.nan, 3.5])],
            "names": [("a", "b"), ["c"]],
            "p": [0.0123456, 0.5],
            "accuracy": [0.812345, 1 / 3],
        }
    )
    report = Report(tmp_path / "r", "T")
    report.add_table("t", frame, digits={"p": 2, "accuracy": 3})
    out = report.write()
    page = (out / "index.html").read_text()
    table = page[page.index('id="tab-t"') :]
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", table[: table.index("</table>")])
    assert cells == [
        "[-70.32, -74.39]",
        "[0.1235, 2]",
        "[&#x27;a&#x27;, &#x27;b&#x27;]",
        "0.012",
        "0.812",
        "[1, None]",
        "[nan, 3.5]",
        "[&#x27;c&#x27;]",
        "0.5",
        "0.333",
    ]
    csv = (out / "tables" / "t.csv").read_text().splitlines()
    assert csv[1] == '"[-70.3241, -74.392]","[0.123457, 2]","[\'a\', \'b\']",0.0123456,0.812345'
    assert frame["scores"][0] == [-70.3240966796875, -74.39200592041016]  # the caller's frame is untouched


def test_table_digits_are_checked(tmp_path):
    report = Report(tmp_path / "r", "T")
    with pytest.raises(ValueError, match=r"digits must be an int from 1 to 17 .*got 0"):
        report.add_table("a", pd.DataFrame({"x": [1.0]}), digits=0)
    with pytest.raises(ValueError, match=r"digits name columns \['y'\] that it does not have"):
        report.add_table("b", pd.DataFrame({"x": [1.0]}), digits={"y": 2})
