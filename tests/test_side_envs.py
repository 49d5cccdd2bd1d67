"""tests/side_envs.py builds its environments only in folders it made: one named by
$ALBERT_TF_<NAME>_VENV that holds other files is refused and left as it was."""

import re

import pytest

import side_envs


def test_a_named_folder_of_other_files_is_refused_and_kept(tmp_path, monkeypatch):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep")
    monkeypatch.setenv("ALBERT_TF_SEQEVAL_VENV", str(folder))
    with pytest.raises(RuntimeError, match=r"mine \(\$ALBERT_TF_SEQEVAL_VENV\) holds files that "
                                           r"are not a test environment made here"):
        side_envs.python("seqeval")
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "keep"


def test_packages_without_a_build_skip_with_pip_s_reason_once(tmp_path, monkeypatch):
    """As tflite-support 0.4.4 on Python 3.12 and 3.13: pip finds no distribution (here, with
    no index and an empty folder of wheels, on any Python). The test calling `run` skips with
    the reason; later calls give it without running pip again; `retry` (the test command's set-up)
    runs pip again."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setitem(side_envs.PACKAGES, "nothing",
                        ("--no-index", f"--find-links={wheels}", "seqeval==1.2.2"))
    # The environment in the test's folder, not beside the checkout's own.
    monkeypatch.setenv("ALBERT_TF_NOTHING_VENV", str(tmp_path / "env"))
    reason = (f"the nothing environment: --no-index --find-links={wheels} seqeval==1.2.2 cannot "
              f"be installed on Python {side_envs.VERSION} (No matching distribution found for "
              f"seqeval==1.2.2)")
    with pytest.raises(pytest.skip.Exception) as skipped:
        side_envs.run("nothing", "print(1)")
    assert str(skipped.value) == reason
    record = tmp_path / "env" / "unavailable.json"
    made = record.stat().st_mtime_ns
    with pytest.raises(side_envs.Unavailable, match=re.escape(reason)):
        side_envs.python("nothing")
    assert record.stat().st_mtime_ns == made
    with pytest.raises(side_envs.Unavailable, match=re.escape(reason)):
        side_envs.python("nothing", retry=True)
    assert record.stat().st_mtime_ns > made
