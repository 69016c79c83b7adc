"""The suite's own caches (llama.cpp's converter, the reference libraries' environments) are each built once
when two test processes ask at the same moment, into a temporary folder renamed into place when complete.

The slow parts (pip's fetch and installs) are stood in for by recorders that take long enough for the second
caller to arrive while the first builds; the callers are threads, each taking the kernel's file lock as a
process would. The same for the Hugging Face folder the endpoint tests serve is in
``tests/sae/explanations/test_server_folder.py``, for the converted-checkpoint cache in ``tests/load/test_cache.py``,
and for two real processes in ``tests/test_atomic.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests import reference_envs
from tests.load import llama_cpp


def _race(ask) -> dict[str, object]:
    """``ask()`` from two threads released at the same moment; what each returned."""
    both_asked, found = threading.Barrier(2), {}

    def caller(name):
        both_asked.wait(timeout=30)
        found[name] = ask()

    callers = [threading.Thread(target=caller, args=(name,)) for name in ("a", "b")]
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join(timeout=60)
    return found


def test_two_callers_fetch_llama_cpps_converter_once(tmp_path, monkeypatch):
    fetched = []

    def slow_extract(sdist, into):
        fetched.append(into)
        (into / "conversion").mkdir()
        time.sleep(0.5)  # the other caller asks while this one extracts
        (into / "convert_hf_to_gguf.py").write_text("# the converter")

    monkeypatch.setattr(llama_cpp, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(llama_cpp, "_sdist", lambda tmp: tmp / "sdist.tar.gz")
    monkeypatch.setattr(llama_cpp, "_extract", slow_extract)
    found = _race(llama_cpp.converter_dir)
    target = tmp_path / f"llama-cpp-python-{llama_cpp.VERSION}"
    assert found == {"a": target, "b": target} and len(fetched) == 1
    assert fetched[0].parent == tmp_path and fetched[0] != target  # built beside it, then renamed
    assert sorted(p.name for p in target.iterdir()) == [".complete", "conversion", "convert_hf_to_gguf.py"]
    assert (
        target / ".complete"
    ).read_text() == f"llama-cpp-python {llama_cpp.VERSION} sha256 {llama_cpp.SHA256}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name, target.name + ".lock"]


def test_two_callers_build_a_reference_environment_once_and_its_scripts_name_its_place(tmp_path, monkeypatch):
    commands = []

    def slow_run(command, name):
        commands.append(command)
        if command[1:3] == ["-m", "venv"]:  # what venv writes that names the folder
            folder = Path(command[3])
            (folder / "bin").mkdir(parents=True)
            (folder / "bin" / "python").write_text("an interpreter")
            (folder / "bin" / "activate").write_text(f"VIRTUAL_ENV='{folder}'\n")
            (folder / "bin" / "pip").write_text(f"#!{folder}/bin/python\nimport pip\n")
        time.sleep(0.2)  # the other caller asks while this one installs

    monkeypatch.setattr(reference_envs, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(reference_envs, "_run", slow_run)
    found = _race(lambda: reference_envs.python("delphi"))
    target = reference_envs.env_dir("delphi")
    assert found == {"a": target / "bin" / "python", "b": target / "bin" / "python"}
    staging = Path(commands[0][3])
    assert staging.parent == tmp_path and staging != target  # built beside it, then renamed
    assert [c[-1] for c in commands] == [  # one build: the venv, torch, the requirements, the unpinned ones
        str(staging),
        reference_envs.TORCH,
        reference_envs.ENVS["delphi"][-1],
        reference_envs.NO_DEPS["delphi"][-1],
    ]
    assert (target / "bin" / "activate").read_text() == f"VIRTUAL_ENV='{target}'\n"
    assert (target / "bin" / "pip").read_text() == f"#!{target}/bin/python\nimport pip\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name, target.name + ".lock"]
