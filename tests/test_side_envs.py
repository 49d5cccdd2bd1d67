"""tests/side_envs.py builds its environments only in folders it made: one named by
$ALBERT_TF_<NAME>_VENV that holds other files is refused and left as it was."""

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
