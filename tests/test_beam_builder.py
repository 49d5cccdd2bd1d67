"""create_pretraining_data on Apache Beam: the local builder's bytes whatever the running mode
and the number of workers; a failed shard leaves no partial file; inputs and outputs on
another filesystem (Beam's FileSystems) are staged through the worker."""

import hashlib
import os
import subprocess
import sys

import pytest
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.localfilesystem import LocalFileSystem

from albert_tf import create_pretraining_data
from albert_tf.data import beam_builder, build_records, pipeline
from albert_tf.data.records import is_tfrecord_file
from albert_tf.data.vocab import train_sentencepiece
from tool_runner import own_flags, run_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeRemote(LocalFileSystem):
    """`fakefs://<local path>`: a filesystem that only Beam knows (TensorFlow does not)."""
    PREFIX = "fakefs://"

    @classmethod
    def scheme(cls):
        return "fakefs"

    def _local(self, path):  # (the base class calls these methods with local paths too)
        return path[len(self.PREFIX):] if path.startswith(self.PREFIX) else path

    def match(self, patterns, limits=None):
        results = super().match([self._local(p) for p in patterns], limits)
        for result in results:
            result.metadata_list = [FileMetadata(self.PREFIX + m.path, m.size_in_bytes)
                                    for m in result.metadata_list]
        return results

    def open(self, path, *args, **kwargs):
        return super().open(self._local(path), *args, **kwargs)

    def create(self, path, *args, **kwargs):
        return super().create(self._local(path), *args, **kwargs)

    def exists(self, path):
        return super().exists(self._local(path))

    def delete(self, paths):  # (the base class's delete globs through match, which prefixes)
        for path in paths:
            os.remove(self._local(path))

    def rename(self, sources, targets):
        return super().rename([self._local(p) for p in sources],
                              [self._local(p) for p in targets])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Persuasion in three shards (paragraphs are documents) and a SentencePiece model."""
    root = tmp_path_factory.mktemp("beam")
    with open(os.path.join(ROOT, "data", "corpus", "persuasion.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()[:2400]
    for i in range(3):
        (root / f"part-{i}.txt").write_text("\n".join(lines[i * 800:(i + 1) * 800]) + "\n",
                                            encoding="utf-8")
    spm = train_sentencepiece(str(root / "part-0.txt"), str(root / "spm"), 400,
                              hard_vocab_limit=False)
    return root, spm


def _digests(directory):
    return {name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
            for name in sorted(os.listdir(directory))}


def _options(spm):
    return build_records.BuildOptions(spm_model_file=spm, max_seq_length=64, dupe_factor=2)


def test_beam_writes_the_local_builder_s_bytes_in_every_mode(corpus, tmp_path):
    root, spm = corpus
    inputs = f"{root}/part-*.txt"
    build_records.build(inputs, str(tmp_path / "local" / "train.tfrecord"), _options(spm))
    expected = _digests(tmp_path / "local")
    assert list(expected) == [f"train.tfrecord-0000{i}-of-00003" for i in range(3)]

    beam_builder.build(inputs, str(tmp_path / "in_memory" / "train.tfrecord"), _options(spm),
                       ["--runner=DirectRunner"])
    assert _digests(tmp_path / "in_memory") == expected
    # The command line, Beam's options passed through: two worker processes.
    proc = subprocess.run(
        [sys.executable, "-m", "albert_tf.create_pretraining_data", f"--input_file={inputs}",
         f"--output_file={tmp_path / 'processes' / 'train.tfrecord'}",
         f"--spm_model_file={spm}", "--max_seq_length=64", "--dupe_factor=2",
         "--runner=DirectRunner", "--direct_running_mode=multi_processing",
         "--direct_num_workers=2"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("DirectRunner: Beam's in-process FnApiRunner, direct_running_mode=multi_processing, "
            "direct_num_workers=2") in proc.stderr
    assert "Prism" not in proc.stderr and "Traceback" not in proc.stderr
    assert _digests(tmp_path / "processes") == expected


def test_a_failed_shard_leaves_complete_files_only_and_trainers_refuse_the_set(
        corpus, tmp_path, capsys):
    root, spm = corpus
    shards = tmp_path / "in"
    shards.mkdir()
    for i in range(3):
        (shards / f"part-{i}.txt").write_bytes((root / f"part-{i}.txt").read_bytes())
    (shards / "part-1.txt").write_bytes(b"a line\n\xff\n")
    out = tmp_path / "out"
    status, last, err = run_tool(create_pretraining_data, capsys,
                                 input_file=f"{shards}/part-*.txt",
                                 output_file=out / "train.tfrecord", spm_model_file=spm,
                                 max_seq_length=64, dupe_factor=1, runner="DirectRunner")
    assert status == 2, err[-3000:]
    assert last.startswith(f"create_pretraining_data: error: {shards}/part-1.txt:2: not valid "
                           f"UTF-8"), last
    assert "Traceback" not in err
    names = sorted(os.listdir(out))
    assert not [n for n in names if n.endswith(".incomplete")]
    assert "train.tfrecord-00001-of-00003" not in names
    assert all(is_tfrecord_file(str(out / n)) for n in names)
    with pytest.raises(ValueError, match=r"matches \d of the 3 shards .*missing 00001"):
        pipeline.expand_file_patterns(f"{out}/train.tfrecord-*")


def test_inputs_and_outputs_on_a_filesystem_only_beam_knows(corpus, tmp_path):
    root, spm = corpus
    (tmp_path / "remote").mkdir()
    for i in range(3):
        (tmp_path / "remote" / f"part-{i}.txt").write_bytes((root / f"part-{i}.txt").read_bytes())
    remote = f"{FakeRemote.PREFIX}{tmp_path}/remote"
    written = beam_builder.build(f"{remote}/part-*.txt", f"{remote}/out/train.tfrecord",
                                 _options(spm), ["--runner=DirectRunner"])
    assert written == [f"{remote}/out/train.tfrecord-0000{i}-of-00003" for i in range(3)]
    build_records.build(f"{root}/part-*.txt", str(tmp_path / "local" / "train.tfrecord"),
                        _options(spm))
    assert _digests(tmp_path / "remote" / "out") == _digests(tmp_path / "local")
    with pytest.raises(FileExistsError, match="exists; pass --overwrite"):
        beam_builder.build(f"{remote}/part-*.txt", f"{remote}/out/train.tfrecord",
                           _options(spm), ["--runner=DirectRunner"])
    beam_builder.build(f"{remote}/part-*.txt", f"{remote}/out/train.tfrecord", _options(spm),
                       ["--runner=DirectRunner"], overwrite=True)  # its own records: replaced
    assert _digests(tmp_path / "remote" / "out") == _digests(tmp_path / "local")


def test_pipeline_options_pass_through_and_without_beam_one_line(corpus, tmp_path, capsys,
                                                                  monkeypatch):
    argv = ["create_pretraining_data", "--input_file=a", "--runner=DataflowRunner",
            "--project", "p", "--region=europe-west4", "--nodo_whole_word_mask",
            "--temp_location=gs://b/tmp", "--dupe_factor", "2"]
    with own_flags():
        create_pretraining_data.define_flags()
        ours, theirs = create_pretraining_data.split_pipeline_args(argv)
        # Without --runner nothing is taken aside: absl names an unknown flag.
        no_runner = create_pretraining_data.split_pipeline_args(argv[:2] + argv[3:5])
    assert ours == ["create_pretraining_data", "--input_file=a", "--runner=DataflowRunner",
                    "--nodo_whole_word_mask", "--dupe_factor", "2"]
    assert theirs == ["--project", "p", "--region=europe-west4", "--temp_location=gs://b/tmp"]
    assert no_runner == (argv[:2] + argv[3:5], [])

    root, spm = corpus
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.delitem(sys.modules, "albert_tf.data.beam_builder")
    monkeypatch.delattr(sys.modules["albert_tf.data"], "beam_builder")
    status, last, _ = run_tool(create_pretraining_data, capsys, input_file=f"{root}/part-0.txt",
                               output_file=tmp_path / "x.tfrecord", spm_model_file=spm,
                               runner="DirectRunner")
    assert status == 2
    assert last.startswith("create_pretraining_data: error: --runner=DirectRunner needs Apache "
                           "Beam: pip install 'albert_tf[beam]'"), last
    assert not (tmp_path / "x.tfrecord").exists()


def test_bad_inputs_and_the_user_s_files_are_one_line_and_untouched(corpus, tmp_path, capsys):
    root, spm = corpus
    common = dict(spm_model_file=spm, max_seq_length=64, dupe_factor=1, runner="DirectRunner")
    out = tmp_path / "out"
    status, last, _ = run_tool(create_pretraining_data, capsys,
                               input_file=f"{root}/part-0.txt,{root}/missing-*.txt",
                               output_file=out / "train.tfrecord", **common)
    assert (status, last) == (2, f"create_pretraining_data: error: No input file matches "
                                 f"'{root}/missing-*.txt'")
    (tmp_path / "empty.txt").write_text("")
    status, last, _ = run_tool(create_pretraining_data, capsys,
                               input_file=f"{root}/part-0.txt,{tmp_path}/empty.txt",
                               output_file=out / "train.tfrecord", **common)
    assert (status, last) == (2, f"create_pretraining_data: error: Input file "
                                 f"{tmp_path}/empty.txt is empty: remove it, or give "
                                 f"--input_file the files that hold text (a comma-separated "
                                 f"list of files or globs)")
    # Beam's own options: a mistyped name (Beam itself only warns) and a bad value.
    for option, message in (
            ("--direct_num_workrs=2", "neither create_pretraining_data nor Beam knows "
                                      "--direct_num_workrs=2 (did you mean --direct_num_workers?)"),
            ("--direct_running_mode=sideways", "Beam pipeline options: argument "
                                               "--direct_running_mode: invalid choice: 'sideways' "
                                               "(choose from 'in_memory', 'multi_threading', "
                                               "'multi_processing')")):
        status, last, _ = run_tool(create_pretraining_data, capsys, option,
                                   input_file=f"{root}/part-*.txt",
                                   output_file=out / "train.tfrecord", **common)
        assert (status, last) == (2, f"create_pretraining_data: error: {message}"), last
    assert not out.exists()
    out.mkdir()
    mine = out / "train.tfrecord-00001-of-00003"
    mine.write_text("the user's notes\n")
    status, last, _ = run_tool(create_pretraining_data, capsys, input_file=f"{root}/part-*.txt",
                               output_file=out / "train.tfrecord", overwrite=True, **common)
    assert status == 2 and last == (f"create_pretraining_data: error: --output_file: {mine} "
                                    f"exists and is not a TFRecord file; give --output_file a "
                                    f"new path"), last
    assert os.listdir(out) == [mine.name] and mine.read_text() == "the user's notes\n"
    # The same on a filesystem only Beam knows: its file is read to see it is not TFRecords.
    status, last, _ = run_tool(create_pretraining_data, capsys, input_file=f"{root}/part-*.txt",
                               output_file=f"fakefs://{out}/train.tfrecord", overwrite=True,
                               **common)
    assert status == 2 and last == (f"create_pretraining_data: error: --output_file: "
                                    f"fakefs://{mine} exists and is not a TFRecord file; give "
                                    f"--output_file a new path"), last
    assert os.listdir(out) == [mine.name] and mine.read_text() == "the user's notes\n"


def test_a_retried_shard_writes_the_same_bytes_once(corpus, tmp_path, monkeypatch):
    """A bundle that fails in the middle of a shard and the runner's retry of it: one
    complete file with the bytes of a run without failure, no temporary file left, also where
    a killed worker left its partial `.incomplete` file behind."""
    root, spm = corpus
    options = _options(spm)
    expected = tmp_path / "expected.tfrecord"
    count = build_records.build_shard(2, str(root / "part-2.txt"), [str(expected)], options)[0]
    write_batch = build_records._write_batch
    attempts = []

    def failing_once(writers, batch, total):
        total = write_batch(writers, batch, total)
        if not attempts:
            attempts.append(total)
            raise ConnectionError("worker lost")
        return total

    monkeypatch.setattr(build_records, "_write_batch", failing_once)
    dofn = beam_builder.BuildShard(options)
    dofn.setup()
    output = tmp_path / "out" / "train.tfrecord-00002-of-00003"
    job = (2, str(root / "part-2.txt"), [str(output)])
    with pytest.raises(ConnectionError):
        list(dofn.process(job))
    assert attempts and not output.exists()
    (tmp_path / "out" / (output.name + ".incomplete")).write_bytes(b"partial" * 1000)
    assert list(dofn.process(job)) == [(2, count)]
    dofn.teardown()
    assert output.read_bytes() == expected.read_bytes()
    assert os.listdir(output.parent) == [output.name]


def test_a_failing_filesystem_is_one_line_with_status_1(corpus, tmp_path, capsys, monkeypatch):
    from apache_beam.io.filesystem import BeamIOError
    from apache_beam.io.filesystems import FileSystems

    def refused(patterns, *args, **kwargs):
        raise BeamIOError("Match operation failed", {patterns[0]: PermissionError("403 denied")})

    monkeypatch.setattr(FileSystems, "match", refused)
    root, spm = corpus
    status, last, err = run_tool(create_pretraining_data, capsys,
                                 input_file="fakefs:///bucket/part-*.txt",
                                 output_file=tmp_path / "train.tfrecord", spm_model_file=spm,
                                 runner="DirectRunner")
    assert status == 1 and "Traceback" not in err
    assert last.startswith("create_pretraining_data: error: Match operation failed with "
                           "exceptions {'fakefs:///bucket/part-*.txt': PermissionError('403 "
                           "denied')}"), last
