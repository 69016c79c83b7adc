"""``--device-map``, ``--max-memory`` and ``--offload-folder`` on commands and studies."""

from __future__ import annotations

import argparse

import pytest

from interp.arguments import ArgumentParser, add_placement_arguments
from interp.registry import study_parser
from interp.study import StudyInputError, start
from tests import test_cli_generate as generate_cli

pytest.importorskip("accelerate")
PROMPT = generate_cli.PROMPT
ON_DISK = '{"embed": "cpu", "blocks.0": "disk", "blocks.1": "cpu", "ln_final": "cpu", "unembed": "disk"}'


folder = generate_cli.folder  # the same tiny checkpoint, and the same way of running a command
_run = generate_cli._run


def _parse(*argv: str) -> argparse.Namespace:
    parser = ArgumentParser(prog="t")
    parser.add_argument("--device", default=None)
    add_placement_arguments(parser)
    return parser.parse_args(argv)


def test_the_flags_parse_into_load_keywords():
    args = _parse("--device-map", "auto", "--max-memory", "0=20GiB, cpu=60GiB", "--offload-folder", "off")
    assert args.device_map == "auto"
    assert args.max_memory == {0: "20GiB", "cpu": "60GiB"}
    assert _parse("--device-map", '{"embed": "cpu"}').device_map == {"embed": "cpu"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device-map", "balanced"], "argument --device-map: 'balanced'; give 'auto' or a JSON object"),
        (
            ["--max-memory", "cpu:60GiB"],
            "argument --max-memory: 'cpu:60GiB' in 'cpu:60GiB'; write DEVICE=SIZE",
        ),
    ],
)
def test_malformed_flags_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit):
        _parse(*argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_generate_on_a_model_with_blocks_on_disk_writes_the_same_text(folder, capsys, tmp_path):
    status, plain, _ = _run(capsys, "generate", folder, PROMPT, "--max-new-tokens", 9)
    status_map, placed, _ = _run(
        capsys,
        "generate",
        folder,
        PROMPT,
        "--max-new-tokens",
        9,
        "--device-map",
        ON_DISK,
        "--offload-folder",
        tmp_path,
    )
    assert status == status_map == 0
    assert placed == plain and plain.strip()


def test_command_errors_come_before_the_model_loads(capsys, tmp_path):
    missing = tmp_path / "no-model"
    status, _, err = _run(capsys, "generate", missing, PROMPT, "--device", "cpu", "--device-map", "auto")
    assert status == 2 and "--device cpu and --device-map: give one" in err
    status, _, err = _run(capsys, "generate", missing, PROMPT, "--max-memory", "cpu=1GiB")
    assert status == 2 and "--max-memory goes with --device-map; add --device-map auto" in err


def test_a_study_run_loads_with_its_device_map(folder, tmp_path):
    parser = study_parser("placed", "a study", default_model=str(folder))
    run = start(
        parser, ["--out", str(tmp_path / "r"), "--device-map", ON_DISK, "--offload-folder", str(tmp_path)]
    )
    assert run.placement["offload_folder"] == str(tmp_path)
    model = run.load(str(folder))
    assert model.hf_device_map["blocks.0"] == "disk"
    with pytest.raises(StudyInputError, match="runs on the CPU only .*; drop --device-map"):
        start(
            study_parser("cpu", "a study", default_model=str(folder), cpu_only="exact sums"),
            ["--out", str(tmp_path / "c"), "--device-map", "auto"],
        )
