"""Ordinary mistakes, made as a new user would, through the tools' command lines (run in this
process, as `python -m albert_tf.<tool>` runs them): each ends in one line `<tool>: error: …`
naming the flag or file, with exit status 2 (1 for a failure during the work, 130/143 after an
interrupt), no traceback, and every byte that was there before unchanged."""

import glob
import gzip
import importlib
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys

import pytest
import tensorflow as tf
from absl import flags

from albert_tf import (AlbertConfig, AlbertPretrainer, cli, convert_checkpoint,
                       create_pretraining_data, export_checkpoints, export_hub, export_to_tfhub,
                       predict, run_classifier, run_pretraining, run_race, run_squad, train_vocab)
from albert_tf.data.vocab import train_sentencepiece
from albert_tf.training.run_lock import LOCK_NAME, RunLock
from conftest import TINY, write_pretraining_records
from tool_runner import assert_refused, digests, run_tool, run_tool_logged

WORDS = ("the river ran past an old mill where the miller kept seven grey geese and a dog that "
         "barked at every cart on the road to town").split()
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A release directory (config, TF1 model.ckpt-best, SentencePiece model), pretraining
    records, a GLUE SST-2 task, and a pretraining run directory with two checkpoints."""
    root = tmp_path_factory.mktemp("mistakes")
    rng = random.Random(0)
    corpus = root / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) + ".\n" +
                              ("\n" if i % 5 == 4 else "") for i in range(400)), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 60, hard_vocab_limit=False)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    config = AlbertConfig(**{**TINY, "vocab_size": vocab})
    release = root / "release"
    tf.keras.utils.set_random_seed(0)
    AlbertPretrainer(config).save_pretrained(str(release), format="tf1")
    shutil.copy(spm, release / "30k-clean.model")
    shutil.copy(spm[:-len(".model")] + ".vocab", release / "30k-clean.vocab")
    records = [write_pretraining_records(root / f"train-{i}.tfrecord", 24, vocab=vocab, seed=i)
               for i in range(2)]
    glue = root / "glue" / "SST-2"
    glue.mkdir(parents=True)
    for split, n in (("train", 32), ("dev", 8), ("test", 8)):
        rows = ["sentence\tlabel" if split != "test" else "index\tsentence"]
        rows += [(f"{' '.join(rng.choices(WORDS, k=6))}\t{i % 2}" if split != "test"
                  else f"{i}\t{' '.join(rng.choices(WORDS, k=6))}") for i in range(n)]
        (glue / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    paths = dict(root=root, corpus=str(corpus), spm=spm, vocab=vocab, release=str(release),
                 config=str(release / "albert_config.json"), records=records,
                 glue=str(root / "glue"), run=str(root / "run"))
    return paths


def pretrain_flags(world, output_dir, **extra):
    values = dict(albert_config_file=world["config"], input_file=",".join(world["records"]),
                  output_dir=output_dir, max_seq_length=16, max_predictions_per_seq=4,
                  train_batch_size=4, num_train_steps=4, num_warmup_steps=1,
                  save_checkpoints_steps=2, log_steps=2, mixed_precision="none",
                  jit_compile="false")
    values.update(extra)
    return values


@pytest.fixture(scope="module")
def run_dir(world):
    """A finished pretraining run: model.ckpt-2 and -4, albert_config.json, summaries."""
    assert run_tool(run_pretraining, None, **pretrain_flags(world, world["run"])) == 0
    return world["run"]


# ---- 1. no tool replaces what it did not write -----------------------------------------------

def test_export_hub_into_a_run_directory_or_a_file_or_its_input_is_refused(world, run_dir,
                                                                            tmp_path, capsys):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    before = digests(run_dir, world["release"], afile)
    assert_refused(run_tool(export_hub, capsys, init_checkpoint=run_dir, export_path=run_dir),
                   f"--export_path={run_dir} is the input --init_checkpoint={run_dir}")
    assert_refused(run_tool(export_hub, capsys, init_checkpoint=world["release"],
                            export_path=run_dir),
                   f"--export_path={run_dir} already holds files that are not a SavedModel "
                   f"export (albert_config.json, checkpoint,")
    assert_refused(run_tool(export_hub, capsys, init_checkpoint=run_dir, export_path=afile),
                   f"--export_path={afile} is an existing file")
    assert_refused(run_tool(export_to_tfhub, capsys, albert_directory=world["release"],
                            export_path=world["release"]),
                   f"--export_path={world['release']} is the input --albert_directory=")
    assert digests(run_dir, world["release"], afile) == before


def test_an_earlier_export_is_replaced_only_with_overwrite(world, tmp_path, capsys):
    export = tmp_path / "encoder"
    (export / "variables").mkdir(parents=True)  # what an earlier export left
    (export / "saved_model.pb").write_bytes(b"earlier")
    args = dict(init_checkpoint=world["release"], export_path=export)
    before = digests(export)
    assert_refused(run_tool(export_hub, capsys, **args),
                   f"--export_path={export} holds a SavedModel export written earlier; pass "
                   f"--overwrite")
    assert digests(export) == before
    status, _, err = run_tool(export_hub, capsys, "--overwrite", **args)
    assert status == 0, err[-2000:]
    loaded = tf.saved_model.load(str(export))
    assert loaded.tokenization_info()["vocab_file"].numpy().decode().endswith("30k-clean.model")


def test_convert_checkpoint_into_its_input_or_a_directory_of_other_files_is_refused(
        world, run_dir, capsys):
    before = digests(run_dir, world["release"])
    assert_refused(run_tool(convert_checkpoint, capsys, input=run_dir, output_dir=run_dir),
                   f"--output_dir={run_dir} is the input --input={run_dir}")
    assert_refused(run_tool(convert_checkpoint, capsys, input=run_dir,
                            output_dir=world["release"], format="tf1"),
                   f"--output_dir={world['release']} already holds files that are not a "
                   f"converted checkpoint (30k-clean.model, 30k-clean.vocab, albert_config.json, "
                   f"checkpoint and 2 more)")
    assert digests(run_dir, world["release"]) == before
    # A model directory transformers wrote holds only names a conversion writes: it is no
    # conversion's (no conversion.json), and --overwrite does not replace it.
    theirs = pathlib.Path(run_dir).parent / "theirs"
    theirs.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (theirs / name).write_text("{}")
    before = digests(theirs)
    assert_refused(run_tool(convert_checkpoint, capsys, "--overwrite", input=run_dir,
                            output_dir=theirs, format="hf"),
                   f"--output_dir={theirs} already holds files that are not a converted "
                   f"checkpoint (config.json, model.safetensors, tokenizer.json, "
                   f"tokenizer_config.json)")
    assert digests(theirs) == before
    # An earlier conversion is replaced whole: none of a KerasHub preset's files stays beside
    # the Hugging Face ones (its tokenizer.json, where it has one, transformers would read).
    ours = pathlib.Path(run_dir).parent / "ours"
    assert run_tool(convert_checkpoint, capsys, input=run_dir, output_dir=ours,
                    format="keras_hub")[0] == 0
    assert (ours / "model.weights.h5").exists()
    assert_refused(run_tool(convert_checkpoint, capsys, input=run_dir, output_dir=ours,
                            format="hf"),
                   f"--output_dir={ours} holds a converted checkpoint written earlier; pass "
                   f"--overwrite")
    assert run_tool(convert_checkpoint, capsys, "--overwrite", input=run_dir, output_dir=ours,
                    format="hf")[0] == 0
    assert sorted(p.name for p in ours.iterdir()) == [
        "config.json", "conversion.json", "model.safetensors"]


def test_export_checkpoints_never_replaces_its_source_or_a_training_checkpoint(world, run_dir,
                                                                               capsys):
    before = digests(run_dir, world["release"])
    assert_refused(run_tool(export_checkpoints, capsys, albert_directory=world["release"],
                            export_path=os.path.join(world["release"], "model.ckpt-best")),
                   "is the input --checkpoint_name=")
    assert_refused(run_tool(export_checkpoints, capsys, "--overwrite", albert_directory=run_dir,
                            checkpoint_name="model.ckpt-2",
                            export_path=os.path.join(run_dir, "model.ckpt-4")),
                   "model.ckpt-4.index exists and is not a TF1 checkpoint")
    assert digests(run_dir, world["release"]) == before


def test_the_builder_never_replaces_its_corpus_and_replaces_records_only_with_overwrite(
        world, tmp_path, capsys):
    args = dict(input_file=world["corpus"], spm_model_file=world["spm"], max_seq_length=16,
                max_predictions_per_seq=3, dupe_factor=1)
    notes = tmp_path / "notes.txt"
    notes.write_text("not records\n")
    before = digests(world["corpus"], notes)
    assert_refused(run_tool(create_pretraining_data, capsys, "--overwrite",
                            output_file=world["corpus"], **args),
                   f"--output_file={world['corpus']} is the input --input_file=")
    assert_refused(run_tool(create_pretraining_data, capsys, "--overwrite", output_file=notes,
                            **args), f"--output_file: {notes} exists and is not a TFRecord file")
    out = tmp_path / "train.tfrecord"
    assert run_tool(create_pretraining_data, capsys, output_file=out, **args)[0] == 0
    records = digests(out)
    assert_refused(run_tool(create_pretraining_data, capsys, output_file=out, **args),
                   f"--output_file: {out} exists; pass --overwrite")
    assert digests(world["corpus"], notes, out) == {**before, **records}
    assert run_tool(create_pretraining_data, capsys, "--overwrite", output_file=out,
                    **args)[0] == 0
    assert digests(out) == records  # seeded: the same bytes again


def test_a_bad_later_input_leaves_no_partial_set_and_the_rerun_needs_no_overwrite(
        world, tmp_path, capsys):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("a line\ncaf\xe9 au lait\n".encode("latin-1"))
    args = dict(spm_model_file=world["spm"], max_seq_length=16, max_predictions_per_seq=3,
                dupe_factor=1, output_file=tmp_path / "records" / "train.tfrecord")
    assert_refused(run_tool(create_pretraining_data, capsys,
                            input_file=f"{world['corpus']},{latin1}", **args),
                   "latin1.txt:2: not valid UTF-8 (invalid continuation byte, byte b'\\xe9' at "
                   "offset 10); removed this build's output files (1 of 2 shards were written), "
                   "so that no partial set is left")
    assert sorted(os.listdir(tmp_path)) == ["latin1.txt"]  # records/ was made by the run
    latin1.write_text("a line\ncafe au lait\n")
    assert run_tool(create_pretraining_data, capsys,
                    input_file=f"{world['corpus']},{latin1}", **args)[0] == 0
    assert sorted(os.listdir(tmp_path / "records")) == [
        "train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002"]
    # A gzip-compressed text: refused before any shard is built (before: "not valid UTF-8"
    # after the others were written).
    packed = tmp_path / "more.txt.gz"
    packed.write_bytes(gzip.compress(b"a line\nanother line\n"))
    shutil.rmtree(tmp_path / "records")
    assert_refused(run_tool(create_pretraining_data, capsys,
                            input_file=f"{world['corpus']},{packed}", **args),
                   f"Input file {packed} is gzip-compressed; the inputs are plain UTF-8 text: "
                   f"decompress it first (gunzip)")
    assert not os.path.exists(tmp_path / "records")
    assert_refused(run_tool(train_vocab, capsys, input_file=f"{world['corpus']},{packed}",
                            model_prefix=tmp_path / "v"), f"Input file {packed} is gzip-compressed")


def test_train_vocab_mistakes(world, tmp_path, capsys):
    before = digests(world["spm"], world["corpus"])
    assert_refused(run_tool(train_vocab, capsys, input_file=world["corpus"],
                            model_prefix=world["spm"][:-len(".model")], vocab_size=60),
                   f"--model_prefix: {world['spm']} exists; pass --overwrite")
    (tmp_path / "empty.txt").write_text("\n\n")
    assert_refused(run_tool(train_vocab, capsys, input_file=tmp_path / "empty.txt",
                            model_prefix=tmp_path / "v"), "empty.txt holds only blank lines")
    (tmp_path / "control.txt").write_bytes(b"\x01\x02\n\x03\n")  # no character to learn
    assert_refused(run_tool(train_vocab, capsys, input_file=tmp_path / "control.txt",
                            model_prefix=tmp_path / "v"), "control.txt holds no text")
    (tmp_path / "latin1.txt").write_bytes("a line\ncaf\xe9 au lait\n".encode("latin-1"))
    assert_refused(run_tool(train_vocab, capsys, input_file=tmp_path / "latin1.txt",
                            model_prefix=tmp_path / "v"), "latin1.txt:2: not valid UTF-8")
    for later in ("empty.txt", "latin1.txt"):  # found while SentencePiece reads the lines
        assert_refused(run_tool(train_vocab, capsys,
                                input_file=f"{world['corpus']},{tmp_path / later}",
                                model_prefix=tmp_path / "v"),
                       {"empty.txt": "empty.txt holds only blank lines",
                        "latin1.txt": "latin1.txt:2: not valid UTF-8"}[later])
    assert_refused(run_tool(train_vocab, capsys, input_file=world["corpus"],
                            model_prefix=tmp_path / "vocab" / "v", vocab_size=5),
                   "--vocab_size=5 is less than this corpus needs: its ")
    assert_refused(run_tool(train_vocab, capsys, input_file=world["corpus"],
                            model_prefix=tmp_path / "vocab" / "v", vocab_size=5000),
                   "--vocab_size=5000 is more than this corpus gives: at most")
    assert not glob.glob(str(tmp_path / "v.*")) and not os.path.exists(tmp_path / "vocab")
    assert digests(world["spm"], world["corpus"]) == before


def test_predict_mistakes(world, tmp_path, capsys):
    lines = tmp_path / "lines.txt"
    lines.write_text("the old mill\n")
    before = digests(lines)
    assert_refused(run_tool(predict, capsys, task="embed", model=world["release"],
                            input_file=lines, output_file=lines),
                   f"--output_file={lines} is the input --input_file={lines}")
    assert digests(lines) == before
    assert_refused(run_tool(predict, capsys, task="qa", model=world["release"], text="who?",
                            text_b="anna came"),
                   "has no SQuAD head (cls/squad/ or start_logits/): give a run_squad output_dir "
                   "or its serving export")
    assert_refused(run_tool(predict, capsys, task="qa", model=world["release"], text="who?",
                            text_b="anna came", window_stride=0),
                   "flag --window_stride=0: 0 is not a positive integer")
    assert_refused(run_tool(predict, capsys, "--text=the old mill", "--text=a new one",
                            task="embed", model=world["release"]),
                   "--text given 2 times: it takes one text; give several in --input_file, "
                   "one per line")
    (tmp_path / "latin1.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    assert_refused(run_tool(predict, capsys, task="embed", model=world["release"],
                            input_file=tmp_path / "latin1.txt"),
                   "latin1.txt: line 2 is not UTF-8 (invalid continuation byte at byte 4)")
    # TF Serving's layout (a SavedModel in each numbered version): the message names the newest.
    serving = tmp_path / "serving"
    for version in ("1", "2", "10"):
        tf.saved_model.save(tf.Module(), str(serving / version))
    assert_refused(run_tool(predict, capsys, task="embed", model=serving, text="the old mill"),
                   f"it holds TF Serving's versions of a SavedModel: give one, {serving}/10")


# ---- 3. configs and flags are checked before anything is written -----------------------------

def test_config_mistakes_stop_before_anything_is_written(world, run_dir, tmp_path, capsys,
                                                         monkeypatch):
    base = json.load(open(world["config"]))
    for name, change, message in [
            ("no_hidden", lambda c: c.pop("hidden_size"), "config has no 'hidden_size'"),
            ("misspelt", lambda c: c.update(num_hidden_layer=c.pop("num_hidden_layers")),
             "config has no 'num_hidden_layers' (given as 'num_hidden_layer'?)")]:
        config = dict(base)
        change(config)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(config))
        out = tmp_path / name
        assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
            world, out, albert_config_file=path)), f"{path}: {message}")
        assert not out.exists()
    # A Hugging Face user's habits: the model's directory as the config file, a
    # pytorch_model.bin without torch installed. One line each, not a traceback.
    release = world["release"]
    assert_refused(run_tool(predict, capsys, task="embed", model=release, text="the mill",
                            albert_config_file=release),
                   f"{release} is a directory, not an ALBERT config file: give "
                   f"{release}/albert_config.json, or leave the flag out")
    assert_refused(run_tool(predict, capsys, task="embed", model=f"{release}/albert_config.json",
                            text="the mill"),
                   f"{release}/albert_config.json is neither a checkpoint prefix nor a checkpoint "
                   f"directory: give its directory, {release}")
    assert_refused(run_tool(predict, capsys, task="embed", model=release, text="the mill",
                            spm_model_file=release),
                   f"--spm_model_file={release} is a directory: give the vocabulary file in it "
                   f"({release}/30k-clean.model)")
    hf_dir = tmp_path / "hf_bin"
    AlbertPretrainer.from_pretrained(release).save_pretrained(str(hf_dir), format="hf")
    (hf_dir / "tokenizer.json").write_text("{}")  # all transformers 5 may save of a tokenizer
    fast = "a Hugging Face fast tokenizer, which albert_tf does not read: give the SentencePiece"
    assert_refused(run_tool(predict, capsys, task="embed", model=hf_dir, text="the mill"),
                   f"beside the checkpoint in {hf_dir}; its {hf_dir}/tokenizer.json is {fast}")
    assert_refused(run_tool(predict, capsys, task="embed", model=hf_dir, text="the mill",
                            spm_model_file=hf_dir / "tokenizer.json"),
                   f"--spm_model_file={hf_dir}/tokenizer.json is {fast}")
    (hf_dir / "pytorch_model.bin").write_bytes(b"not read")
    (hf_dir / "model.safetensors").unlink()
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert_refused(run_tool(predict, capsys, task="embed", model=hf_dir, text="the mill",
                            spm_model_file=world["spm"]),
                   f"{hf_dir}/pytorch_model.bin is a PyTorch pickle: install torch to read it")
    # The run's own config, with another depth: the shared weights would load. Keys no model
    # reads (the original release files' vestiges) are no difference.
    deeper = tmp_path / "deeper.json"
    deeper.write_text(json.dumps(dict(base, num_hidden_layers=8, gap_size=0,
                                      net_structure_type=0)))
    before = digests(run_dir)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, run_dir, albert_config_file=deeper, num_train_steps=6)),
        f"the config differs from the one the run in --output_dir={run_dir} was started with, "
        f"in num_hidden_layers (run: 4, given: 8). Resume with")
    assert digests(run_dir) == before


def test_config_keys_unknown_to_albert_warn(world, tmp_path, caplog):
    config = dict(json.load(open(world["config"])), num_hidden_group=2, net_structure_type=0)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with caplog.at_level("WARNING"):
        loaded = AlbertConfig.from_json_file(str(path))
    assert loaded.num_hidden_groups == TINY["num_hidden_groups"]
    warnings = [r.getMessage() for r in caplog.records]
    assert any("'num_hidden_group' is not an ALBERT setting: did you mean 'num_hidden_groups'"
               in w for w in warnings), warnings
    assert not any("net_structure_type" in w for w in warnings)  # the original's vestige


@pytest.mark.parametrize("flag,value,message", [
    ("learning_rate", "-0.01", "flag --learning_rate=-0.01: must be a positive number"),
    ("save_checkpoints_steps", "0", "flag --save_checkpoints_steps=0: 0 is not a positive"),
    ("num_warmup_steps", "9", "--num_warmup_steps=9 exceeds --num_train_steps=4"),
    ("train_batch_size", "6", "--train_batch_size=6 must divide into 1 replicas × 4 "
                              "accumulation steps"),
])
def test_flag_mistakes_stop_the_pretraining_before_it_writes(world, tmp_path, capsys, flag,
                                                             value, message):
    out = tmp_path / "out"
    extra = {flag: value}
    if flag == "train_batch_size":
        extra["gradient_accumulation_steps"] = 4
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(world, out, **extra)),
                   message)
    assert not out.exists() or not os.listdir(out)


@pytest.mark.parametrize("given,said", [
    ("--do_train=yes", "flag --do_train=yes: 'yes' is not a boolean (true, false, 1 or 0)"),
    ("--train_step=ten", "flag --train_step=ten: 'ten' is not a whole number"),
    ("--learning_rate=fast", "flag --learning_rate=fast: 'fast' is not a number"),
    ("--use_xla", "Unknown command line flag 'use_xla': here it is --jit_compile (--helpshort "
                  "lists the flags)")])
def test_a_value_of_the_wrong_kind_is_said_in_words(capsys, given, said):
    assert_refused(run_tool(run_classifier, capsys, given), said)


def test_run_squad_s_new_flag_mistaken_is_one_line(tmp_path, capsys):
    assert_refused(run_tool(run_squad, capsys, "--v2_head=cls", output_dir=tmp_path / "out"),
                   "flag --v2_head=cls: value should be one of <answer_class|span>")
    assert not (tmp_path / "out").exists()


def test_a_required_flag_missing_is_one_line(capsys):
    code, last, _ = run_tool(run_pretraining, capsys)
    assert code == 2
    assert last in ("run_pretraining: error: --input_file, --output_dir are required "
                    "(--helpshort lists the flags)",
                    "run_pretraining: error: --output_dir, --input_file are required "
                    "(--helpshort lists the flags)"), last


def test_pretraining_takes_the_config_beside_its_init_checkpoint_or_asks_for_one(world, tmp_path,
                                                                                capsys):
    given = pretrain_flags(world, tmp_path / "out", init_checkpoint=world["release"],
                           num_train_steps=2)
    del given["albert_config_file"]
    status, last, _ = run_tool(run_pretraining, capsys, **given)
    assert status == 0, last
    written = json.loads((tmp_path / "out" / "albert_config.json").read_text())
    assert written == json.loads(pathlib.Path(world["config"]).read_text())
    del given["init_checkpoint"]
    assert_refused(run_tool(run_pretraining, capsys, **dict(given, output_dir=tmp_path / "new")),
                   "--albert_config_file is required: the config of the model to pretrain "
                   "(configs/ holds the releases'), unless --init_checkpoint has one beside it")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("tool,flag", [("run_classifier", "task_name"),
                                       ("run_pretraining", "input_file"),
                                       ("run_squad", "doc_stride")])
def test_help_lists_the_flags_the_package_defines(tool, flag):
    """absl's --help lists the main module's own flags; these tools define theirs elsewhere.
    The text above them is the tool's docstring (run_squad's main is a functools.partial: it
    was functools's)."""
    shown = subprocess.run([sys.executable, "-m", f"albert_tf.{tool}", "--help"],
                           capture_output=True, text=True, timeout=300, check=False)
    doc = importlib.import_module(f"albert_tf.{tool}").__doc__
    assert shown.stdout.startswith(doc.strip().splitlines()[0]), shown.stdout[:300]
    assert f"  --{flag}:" in shown.stdout, shown.stdout[-2000:]
    assert "  --learning_rate:" in shown.stdout and shown.returncode == 0  # (absl's: 1)
    # The usage examples keep their lines (the docstrings are raw: a non-raw one joined them).
    assert f"  python -m albert_tf.{tool} --" in shown.stdout and " \\\n      --" in shown.stdout


def test_help_into_a_closed_pipe_ends_quietly():
    """`--help | head`: the reader closes the pipe before the help is written; the tool ends
    with 0 and no BrokenPipeError traceback (before: 9 of 12 tries showed one)."""
    proc = subprocess.Popen([sys.executable, "-m", "albert_tf.run_squad", "--help"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0 and "Traceback" not in err, err[-2000:]


def test_a_checkout_s_shim_runs_as_the_module_does(tmp_path):
    """`python run_pretraining.py` from a checkout: the tool's help text, and its stderr without
    TensorFlow's start-up lines (start_tool before TensorFlow loads)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shown = subprocess.run([sys.executable, os.path.join(root, "create_pretraining_data.py"),
                            "--helpshort"], capture_output=True, text=True, timeout=300,
                           check=False)
    assert shown.returncode == 0
    assert shown.stdout.startswith("Builds ALBERT pretraining TFRecords (MLM + SOP) from text")
    failed = subprocess.run([sys.executable, os.path.join(root, "run_pretraining.py"),
                             "--albert_config_file=missing.json", "--input_file=x",
                             f"--output_dir={tmp_path / 'out'}"], capture_output=True,
                            text=True, timeout=300, check=False, cwd=tmp_path)
    assert (failed.returncode, failed.stderr) == (
        2, "run_pretraining: error: ALBERT config file not found: missing.json\n")


def test_the_module_runs_from_the_folder_above_a_checkout_named_albert_tf(tmp_path):
    """`git clone .../albert_tf` then `python -m albert_tf.run_classifier` from where the
    clone was made: Python takes the checkout (no __init__.py) for the package and runs its
    shim, which imported itself ("partially initialized module"); the tool runs instead."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkout = tmp_path / "albert_tf"
    checkout.mkdir()
    for name in ("run_classifier.py", "README.md"):
        shutil.copy(os.path.join(root, name), checkout / name)
    shown = subprocess.run([sys.executable, "-m", "albert_tf.run_classifier", "--helpshort"],
                           capture_output=True, text=True, timeout=300, check=False,
                           cwd=tmp_path)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr[-2000:]
    assert "--task_name" in shown.stdout


def test_held_out_records_among_the_training_ones_are_said(world, tmp_path):
    """--eval_input_file inside --input_file's glob: the run trains on its held-out records,
    and its log says which (before: nothing did)."""
    held = write_pretraining_records(tmp_path / "heldout.tfrecord", 8, vocab=world["vocab"])
    status, log = run_tool_logged(run_pretraining, **pretrain_flags(
        world, tmp_path / "out", input_file=f"{world['records'][0]},{held}",
        eval_input_file=held, do_eval="true", eval_batch_size=4, num_train_steps=2))
    assert status == 0, log[-2000:]
    assert (f"--eval_input_file's {held} is among --input_file's: the held-out metrics (and "
            f"model.ckpt-best) are of records it trains on") in log


def test_records_are_checked_in_every_file(world, tmp_path, capsys):
    vocab = world["vocab"]
    bigger = write_pretraining_records(tmp_path / "b.tfrecord", 8, vocab=vocab + 40, seed=3)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "out", input_file=f"{world['records'][0]},{bigger}")),
        f"--input_file: {bigger} holds token id")
    longer = write_pretraining_records(tmp_path / "l.tfrecord", 8, seq=32, vocab=vocab)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "out", input_file=f"{world['records'][0]},{longer}")),
        f"{longer}: feature 'input_ids' has length 32 but --max_seq_length implies 16")
    held_out = write_pretraining_records(tmp_path / "e.tfrecord", 45, vocab=vocab)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "out", do_eval="true", eval_input_file=held_out)),
        "--eval_input_file holds 45 records, fewer than --eval_batch_size=64: evaluation reads "
        "whole batches, so it would read none. Lower --eval_batch_size to at most 45")
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "out", do_train="false", do_eval="true", eval_batch_size=8)),
        f"--do_eval without --do_train needs a checkpoint in --output_dir={tmp_path / 'out'}")
    assert not (tmp_path / "out").exists()


def test_a_run_directory_holding_another_vocabulary_is_refused(world, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    train_sentencepiece(world["corpus"], str(other / "spm"), 50, hard_vocab_limit=False)
    before = digests(other)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, other, spm_model_file=world["spm"])),
        f"--output_dir={other} holds another vocabulary (spm.model) than this run's "
        f"{world['spm']}, and predict, export_hub and convert_checkpoint would read the run's "
        f"checkpoints with it: give --output_dir a new directory, or move that file out")
    assert digests(other) == before
    same = tmp_path / "same"  # the run's own vocabulary there (a user's layout): kept, described
    same.mkdir()
    shutil.copy(world["spm"], same / "30k.model")
    assert run_tool(run_pretraining, capsys, **pretrain_flags(
        world, same, spm_model_file=world["spm"], num_train_steps=2))[0] == 0
    assert json.loads((same / "tokenizer_config.json").read_text()) == {"do_lower_case": True}
    assert sorted(n for n in os.listdir(same) if n.endswith(".model")) == ["30k.model"]


def _another_vocabulary(world, tmp_path):
    """A SentencePiece model of the world's size trained on other words (reversed)."""
    rng = random.Random(1)
    text = tmp_path / "other.txt"
    text.write_text("".join(" ".join(w[::-1] for w in rng.choices(WORDS, k=8)) + ".\n"
                            for _ in range(300)))
    return train_sentencepiece(str(text), str(tmp_path / "other"), world["vocab"],
                               hard_vocab_limit=False)


def test_a_vocabulary_flag_naming_another_than_the_model_s_is_refused(world, tmp_path, capsys):
    """--spm_model_file naming another vocabulary of the same size than the one beside
    --init_checkpoint (or predict's --model) is refused before anything is written: its ids
    would index the model's embeddings as the model's own. The same vocabulary saved elsewhere
    is the model's."""
    other = _another_vocabulary(world, tmp_path)
    release_model = os.path.join(world["release"], "30k-clean.model")
    out = tmp_path / "out"
    said = (f"--spm_model_file={other} is not the vocabulary the model was trained with "
            f"({release_model}; id ")
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=out,
                            init_checkpoint=world["release"], spm_model_file=other), said)
    assert not out.exists()
    assert_refused(run_tool(predict, capsys, task="embed", model=world["release"],
                            text="the old mill", spm_model_file=other), said)
    hub = tmp_path / "hub"  # (before: exported with it, a size warning at most)
    assert_refused(run_tool(export_hub, capsys, export_type="encoder",
                            init_checkpoint=world["release"], spm_model_file=other,
                            export_path=hub), said)
    assert not hub.exists()
    status, _, err = run_tool(predict, capsys, task="embed", model=world["release"],
                              text="the old mill", spm_model_file=world["spm"])
    assert status == 0, err[-2000:]
    # A Hugging Face directory with only the fast tokenizer's tokenizer.json (all transformers 5
    # may save): the pieces of its Unigram model are the model's vocabulary.
    hf_dir = tmp_path / "hf"
    AlbertPretrainer.from_pretrained(world["release"]).save_pretrained(str(hf_dir), format="hf")
    for name in os.listdir(hf_dir):
        if name.endswith((".model", ".vocab")):
            os.remove(hf_dir / name)
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=world["spm"])
    (hf_dir / "tokenizer.json").write_text(json.dumps({"model": {"type": "Unigram", "vocab": [
        [sp.id_to_piece(i), sp.get_score(i)] for i in range(sp.get_piece_size())]}}))
    assert_refused(run_tool(predict, capsys, task="embed", model=hf_dir, text="the old mill",
                            spm_model_file=other),
                   f"--spm_model_file={other} is not the vocabulary the model was trained with "
                   f"({hf_dir}/tokenizer.json; id ")
    status, _, err = run_tool(predict, capsys, task="embed", model=hf_dir, text="the old mill",
                              spm_model_file=world["spm"])
    assert status == 0, err[-2000:]
    # A rerun into a run's directory: its checkpoints are the model, their vocabulary the one
    # the run kept there (not "give --output_dir a new directory", which has no checkpoints).
    common = dict(task_name="sst-2", data_dir=world["glue"], output_dir=out,
                  init_checkpoint=world["release"], train_step=1, save_checkpoints_steps=1,
                  train_batch_size=8, max_seq_length=16, mixed_precision="none")
    status, last, err = run_tool(run_classifier, capsys, "--do_train", **common)
    assert status == 0, last
    del common["init_checkpoint"]
    status, last, _ = run_tool(run_classifier, capsys, "--nodo_train", "--do_predict",
                               spm_model_file=other, **common)
    assert status == 2 and re.fullmatch(
        rf"run_classifier: error: --spm_model_file={re.escape(other)} is not the vocabulary the "
        rf"model was trained with \({re.escape(str(out))}/30k-clean.model; id \d+ is '[^']+' in "
        r"--spm_model_file's, '[^']+' in the model's\): leave out --spm_model_file to use the "
        r"model's", last), last


def test_ids_beyond_the_vocabulary_later_in_a_file_stop_training_naming_it(world, tmp_path):
    """A record past the first holds an id the config has no embedding for: the batch check
    stops training and the message names the file and the record."""
    from albert_tf.data.pipeline import pretraining_dataset
    from albert_tf.modeling.optimizers import create_optimizer
    from albert_tf.training.failures import CorruptInputError
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    vocab = world["vocab"]
    path = str(tmp_path / "mixed.tfrecord")
    good = list(tf.data.TFRecordDataset(world["records"][0]).as_numpy_iterator())
    bad = list(tf.data.TFRecordDataset(write_pretraining_records(
        tmp_path / "b.tfrecord", 4, vocab=vocab + 40, seed=5)).as_numpy_iterator())
    with tf.io.TFRecordWriter(path) as w:
        for record in good[:8] + bad:
            w.write(record)
    tops = [max(max(tf.train.Example.FromString(r).features.feature[n].int64_list.value)
                for n in ("input_ids", "masked_lm_ids")) for r in bad]
    first_bad = 8 + next(i for i, top in enumerate(tops) if top >= vocab)

    def dataset_fn(ctx):
        return pretraining_dataset([path], 4, 16, 4, is_training=False, input_context=ctx,
                                   vocab_size=vocab)
    dataset_fn.input_files, dataset_fn.vocab_size = [path], vocab
    trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                      lambda: AlbertPretrainer(AlbertConfig(**{**TINY, "vocab_size": vocab})),
                      lambda: create_optimizer(1e-3, 10, 1), str(tmp_path / "run"),
                      TrainerOptions(global_batch_size=4))
    with pytest.raises(CorruptInputError, match=rf"{path} record {first_bad} holds token id \d+ "
                       rf"but the config's vocab_size is {vocab}: were the records built"):
        trainer.evaluate(dataset_fn)
    with pytest.raises(CorruptInputError, match=r"were the records built with another "
                                                r"vocabulary\? Training stopped after step \d "):
        trainer.train(dataset_fn, 10)


def test_records_built_with_another_vocabulary_or_casing_are_refused_and_their_casing_kept(
        world, tmp_path, capsys):
    """create_pretraining_data writes its vocabulary's fingerprint into every record: pretraining
    refuses another vocabulary (same size, other pieces), a --do_lower_case the records were not
    built with, and files built with both casings; without the flag the run keeps the records'
    casing beside its checkpoints (before: do_lower_case true, whatever the records')."""
    from albert_tf.data.build_records import BuildOptions, build

    def records(name, lower, spm=world["spm"]):
        options = BuildOptions(spm_model_file=spm, do_lower_case=lower, max_seq_length=16,
                               max_predictions_per_seq=4, dupe_factor=1)
        return build(world["corpus"], str(tmp_path / name), options)[0]

    cased, lower = records("cased.tfrecord", False), records("lower.tfrecord", True)
    out = tmp_path / "out"
    assert run_tool(run_pretraining, capsys, **pretrain_flags(
        world, out, input_file=cased, spm_model_file=world["spm"], num_train_steps=2))[0] == 0
    assert json.loads((out / "tokenizer_config.json").read_text()) == {"do_lower_case": False}
    assert_refused(run_tool(run_pretraining, capsys, "--do_lower_case", **pretrain_flags(
        world, tmp_path / "o2", input_file=cased, spm_model_file=world["spm"])),
        "--do_lower_case=True, but the records were built with --do_lower_case=False: drop the "
        "flag, or rebuild the records with it")
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "o2", input_file=f"{lower},{cased}", spm_model_file=world["spm"])),
        f"--input_file: the files were built with different --do_lower_case: {cased} cased, "
        f"the others lower-cased; rebuild them with one setting")
    other = _another_vocabulary(world, tmp_path)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, tmp_path / "o2", input_file=lower, spm_model_file=other)),
        f"--input_file: {lower} was built with another vocabulary than {other} "
        f"(create_pretraining_data wrote its fingerprint into the records): pretraining would "
        f"teach this vocabulary's pieces the other's ids")
    assert not (tmp_path / "o2").exists()


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(world, tmp_path, capsys):
    smaller = tmp_path / "config.json"
    smaller.write_text(json.dumps(dict(json.load(open(world["config"])),
                                       vocab_size=world["vocab"] - 10)))
    out = tmp_path / "out"
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=out, albert_config_file=smaller,
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"the vocabulary {world['spm']} has {world['vocab']} entries but the "
                   f"model's vocab_size is {world['vocab'] - 10}")
    assert not out.exists()


def test_an_output_dir_that_is_a_file_or_read_only_is_one_line(world, tmp_path, capsys,
                                                               monkeypatch):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(world, afile)),
                   f"--output_dir={afile} is a file, not a directory")
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=afile / "run",
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"--output_dir={afile}/run cannot be created: a file is in the way")
    assert afile.read_text() == "mine\n"
    read_only = tmp_path / "ro"
    read_only.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs",
                              str(read_only)], capture_output=True).returncode == 0
    if not mounted:  # where the machine allows no mount: the file system's answer, injected
        def denied(path):
            raise tf.errors.PermissionDeniedError(None, None, f"{path}; Read-only file system")
        monkeypatch.setattr(tf.io.gfile, "makedirs", denied)
    try:
        assert_refused(run_tool(run_pretraining, capsys,
                                **pretrain_flags(world, read_only / "run")),
                       f"--output_dir={read_only}/run cannot be created: permission denied")
    finally:
        if mounted:
            subprocess.run(["umount", "--lazy", str(read_only)], check=True)


def test_a_missing_or_broken_predict_file_stops_fine_tuning_before_training(world, tmp_path,
                                                                          capsys):
    glue = tmp_path / "glue"
    shutil.copytree(world["glue"], glue)
    (glue / "SST-2" / "test.tsv").unlink()
    out = tmp_path / "runs" / "out"
    for there in (False, True):  # a refused run leaves no empty directory; one that was there stays
        if there:
            out.mkdir(parents=True)
        assert_refused(run_tool(run_classifier, capsys, "--do_train", "--do_predict",
                                task_name="sst-2", data_dir=glue, output_dir=out,
                                init_checkpoint=world["release"], spm_model_file=world["spm"]),
                       f"sst-2 test file not found: {glue}/SST-2/test.tsv")
        assert (tmp_path / "runs").exists() == there and (not there or os.listdir(out) == [])
    # A bad row of the test file, too, stops the run before training (not after it).
    test = glue / "SST-2" / "test.tsv"
    test.write_text("index\tsentence\n0\tthe river ran\n1\n", encoding="utf-8")
    assert_refused(run_tool(run_classifier, capsys, "--do_train", "--do_predict",
                            task_name="sst-2", data_dir=glue, output_dir=out,
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"{test}:3: expected at least 2 tab-separated columns (text_a in column 1), "
                   f"found 1")
    assert os.listdir(out) == []


def test_only_the_directories_a_run_made_itself_are_removed_and_only_when_empty(tmp_path):
    from albert_tf import outputs
    from albert_tf.files import make_output_dir
    outputs.CREATED.clear()
    make_output_dir(tmp_path / "runs" / "a" / "b")
    make_output_dir(tmp_path / "runs" / "a")  # there already: not this call's
    (tmp_path / "theirs").mkdir()
    make_output_dir(tmp_path / "theirs")
    make_output_dir(tmp_path / "kept" / "x")
    (tmp_path / "kept" / "x" / "model.ckpt-1.index").write_text("")
    assert outputs.CREATED == [str(tmp_path / "runs"), str(tmp_path / "kept")]
    outputs.remove_created_if_empty()
    assert sorted(os.listdir(tmp_path)) == ["kept", "theirs"] and outputs.CREATED == []
    assert (tmp_path / "kept" / "x" / "model.ckpt-1.index").exists()


def test_every_bad_row_of_one_s_own_files_is_listed_at_once_before_anything_is_written(
        tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("text,label\nfine,pos\n,neg\ngood,\nok,neg\n")
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nnice,maybe\n")
    before = digests(tmp_path)
    status, _, err = run_tool(run_classifier, capsys, "--do_train", "--do_eval",
                              train_file=train, validation_file=dev, output_dir=tmp_path / "out")
    lines = err.strip().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("run_classifier: error:"))
    assert status == 2 and lines[first:] == [
        "run_classifier: error: 3 problems in the input, in file order:",
        f"{train}:3: empty text in column 'text'",
        f"{train}:4: no label in column 'label'",
        f"{dev}:2: label 'maybe' is not among the training file's labels (neg, pos)"]
    assert digests(tmp_path) == before and not (tmp_path / "out").exists()


def test_a_file_given_without_its_action_is_said_to_be_only_checked(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\nfine,pos\n,neg\n")
    other = tmp_path / "other.csv"
    other.write_text("text,label\nok,pos\n")
    status, log = run_tool_logged("run_classifier", "--do_train", train_file=train,
                                  validation_file=other, test_file=other,
                                  output_dir=tmp_path / "out")
    assert status == 2 and not (tmp_path / "out").exists()
    assert "--validation_file without --do_eval: its rows are checked, nothing is evaluated" in log
    assert "--test_file without --do_predict: its rows are checked, nothing is predicted" in log


def test_a_bad_delimiter_is_one_line_before_anything_is_written(tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("text;label\nfine;pos\nbad;neg\n")
    before = digests(tmp_path)
    for given, line in ((";;", "--delimiter=;;: one character (or tab)"),
                        ('"', "--delimiter='\"': not a quote or a line break, which CSV reserves")):
        assert_refused(run_tool(run_classifier, capsys, "--do_train", train_file=train,
                                output_dir=tmp_path / "out", delimiter=given), line)
    assert digests(tmp_path) == before and not (tmp_path / "out").exists()


def test_export_hub_from_a_fine_tuning_directory_reads_its_best_checkpoint(world, run_dir,
                                                                        tmp_path):
    from tool_runner import run_tool_logged
    run = tmp_path / "finetuned"
    shutil.copytree(run_dir, run)
    for path in glob.glob(str(run / "model.ckpt-2.*")):  # step 2 was the best, 4 the latest
        shutil.copy(path, path.replace("model.ckpt-2", "model.ckpt-best"))
    status, log = run_tool_logged(export_hub, export_type="encoder", init_checkpoint=run,
                                  export_path=tmp_path / "hub", spm_model_file=world["spm"])
    assert status == 0, log[-2000:]
    assert f"Reading the albert_tf checkpoint {run}/model.ckpt-best" in log


def test_a_tool_refuses_another_kind_of_run_before_writing_there(world, run_dir, capsys):
    before = digests(run_dir)
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=run_dir,
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"--output_dir={run_dir} holds the checkpoints of another run (pretraining), "
                   f"and this is fine-tuning of sst-2: give --output_dir a new directory (to "
                   f"start from that run's weights, pass it as --init_checkpoint)")
    assert digests(run_dir) == before


def test_fine_tuning_into_a_live_pretraining_run_stops_before_writing(world, run_dir, capsys):
    """The pretraining run still holds its directory: run_classifier names it and writes no
    feature cache, checkpoint or result there."""
    before = digests(run_dir)
    with RunLock(run_dir, "run_pretraining"):
        before_lock = {k: v for k, v in digests(run_dir).items() if not k.endswith(LOCK_NAME)}
        assert before_lock == before
        assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                                data_dir=world["glue"], output_dir=run_dir,
                                init_checkpoint=world["release"], spm_model_file=world["spm"]),
                       f"--output_dir={run_dir} is in use by run_pretraining on host ")
    assert digests(run_dir) == before


@pytest.mark.parametrize("flag,value,message", [
    ("adam_epsilon", "0", "flag --adam_epsilon=0.0: must be a positive number"),
    ("weight_decay_rate", "-1", "flag --weight_decay_rate=-1: -1.0 is not a non-negative"),
    ("tflite_quantization", "int4", "flag --tflite_quantization=int4: value should be one of"),
    ("export_tflite", "all", "flag --export_tflite=all: value should be one of"),
])
def test_optimizer_flag_mistakes_stop_fine_tuning_before_it_writes(world, tmp_path, capsys,
                                                                   flag, value, message):
    out = tmp_path / "out"
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=out,
                            init_checkpoint=world["release"], spm_model_file=world["spm"],
                            **{flag: value}), message)
    assert not out.exists()


def test_batches_must_divide_over_the_replicas(caplog):
    from albert_tf.training.distribution import check_batch_sizes

    class TwoReplicas:
        num_replicas_in_sync = 2
    with pytest.raises(ValueError, match=r"--eval_batch_size=3 must be a multiple of the 2 "
                                         r"replicas"):
        check_batch_sizes(TwoReplicas(), 8, 1, eval_batch_size=3)
    with pytest.raises(ValueError, match=r"--train_batch_size=6 must divide into 2 replicas × 2"):
        check_batch_sizes(TwoReplicas(), 6, 2)
    with caplog.at_level("INFO", logger="absl"):  # the split, said (once only in run.json)
        check_batch_sizes(TwoReplicas(), 32, 4)
    assert ("Training batch 32: 2 replica(s) × 4 accumulation step(s) × 4 examples a "
            "micro-batch") in caplog.messages


def test_fine_tuning_export_into_its_own_output_dir_is_refused_before_training(world, tmp_path,
                                                                               capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    before = digests(out, world["glue"])
    default = flags.FLAGS["max_seq_length"].default  # which script defined it first decides
    assert_refused(run_tool(run_classifier, capsys, "--do_train", task_name="sst-2",
                            data_dir=world["glue"], output_dir=out, export_dir=out,
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"--export_dir={out} is the input --output_dir={out}")
    assert_refused(run_tool(run_squad, capsys, "--do_train", train_file=world["corpus"],
                            output_dir=out, export_dir=world["release"],
                            init_checkpoint=world["release"], spm_model_file=world["spm"]),
                   f"--export_dir={world['release']} is the input --init_checkpoint=")
    assert digests(out, world["glue"]) == before
    assert flags.FLAGS["max_seq_length"].default == default  # run_squad's 384 did not stay


def test_fine_tuning_without_a_model_says_which_flags_give_one(world, tmp_path, capsys):
    common = dict(task_name="sst-2", data_dir=world["glue"], spm_model_file=world["spm"])
    assert_refused(run_tool(run_classifier, capsys, "--do_train", output_dir=tmp_path / "a",
                            **common),
                   "no model given: --init_checkpoint (a pretrained ALBERT: a release directory, "
                   "a checkpoint beside its albert_config.json, a model name) or "
                   "--albert_hub_module_handle, or --albert_config_file to train one from random "
                   "weights")
    bare = tmp_path / "bare"
    shutil.copytree(world["release"], bare)
    os.remove(bare / "albert_config.json")
    assert_refused(run_tool(run_classifier, capsys, "--do_train", output_dir=tmp_path / "b",
                            init_checkpoint=bare / "model.ckpt-best", **common),
                   f"--init_checkpoint={bare}/model.ckpt-best has no albert_config.json or "
                   f"config.json beside it: give its config as --albert_config_file")


def test_evaluating_without_a_model_to_evaluate_is_refused_before_anything_is_written(
        world, tmp_path, capsys):
    out = tmp_path / "out"
    evaluates = ("--do_eval without --do_train evaluates a fine-tuned model: the checkpoints of a "
                 "run in --output_dir, or an --init_checkpoint with the task's head; ")
    assert_refused(run_tool(run_classifier, capsys, "--do_eval", task_name="sst-2",
                            data_dir=world["glue"], spm_model_file=world["spm"],
                            init_checkpoint=world["release"], output_dir=out),
                   f"{evaluates}--init_checkpoint={world['release']} holds no head for this task "
                   f"(a pretrained model: add --do_train to fine-tune it)")
    assert not out.exists()  # no feature cache
    dev = tmp_path / "dev.csv"  # your own data: the same line, not one about its files
    dev.write_text("text,label\na b,x\nc d,y\n")
    assert_refused(run_tool(run_classifier, capsys, "--do_eval", train_file=dev,
                            validation_file=dev, spm_model_file=world["spm"],
                            albert_config_file=world["config"],
                            output_dir=out),
                   f"{evaluates}--output_dir={out} holds no checkpoint and no --init_checkpoint "
                   f"is given")
    assert not out.exists()


def test_run_race_usage_mistake_is_one_line(world, tmp_path, capsys):
    assert_refused(run_tool(run_race, capsys, "--high_only", "--middle_only",
                            data_dir=tmp_path, output_dir=tmp_path / "out"),
                   "--high_only and --middle_only exclude each other")
    assert not (tmp_path / "out").exists()


# ---- 2. resume keeps good work -------------------------------------------------------------

def test_a_release_directory_is_never_trained_over(world, capsys):
    before = digests(world["release"])
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(
        world, world["release"], init_checkpoint=world["release"])),
        f"--output_dir={world['release']} holds checkpoint files (checkpoint, "
        f"model.ckpt-best.index) but no checkpoint of a run to resume")
    assert digests(world["release"]) == before


def test_a_run_whose_checkpoints_are_all_unreadable_is_not_restarted(world, run_dir, tmp_path,
                                                                      capsys):
    out = tmp_path / "run"
    shutil.copytree(run_dir, out)
    for data in glob.glob(str(out / "model.ckpt-*.data-*")):
        with open(data, "r+b") as f:
            f.truncate(16)
    before = digests(out)
    assert_refused(run_tool(run_pretraining, capsys, **pretrain_flags(world, out,
                                                                      num_train_steps=6)),
                   f"no checkpoint in --output_dir={out} can be read: model.ckpt-4 (Read less "
                   f"bytes than requested); model.ckpt-2 (Read less bytes than requested)")
    assert digests(out) == before


# ---- 4. interrupts stop every later stage -----------------------------------------------------

def test_an_interrupted_fine_tuning_exits_130_and_runs_no_later_stage(world, tmp_path, capsys,
                                                                      monkeypatch, caplog):
    """(From random weights, which the run says: no --init_checkpoint.)"""
    from albert_tf.training import failures
    original = failures.StopRequest.__init__

    def interrupted_at_once(self):
        original(self)
        self.requested, self.signum = "SIGINT", signal.SIGINT
    monkeypatch.setattr(failures.StopRequest, "__init__", interrupted_at_once)
    out, export = tmp_path / "run", tmp_path / "export"
    code, last, err = run_tool(
        run_classifier, capsys, "--do_train", "--do_eval", "--do_predict", task_name="sst-2",
        data_dir=world["glue"], output_dir=out, export_dir=export,
        albert_config_file=world["config"], spm_model_file=world["spm"], max_seq_length=16,
        train_batch_size=4, train_step=8, save_checkpoints_steps=4, mixed_precision="none",
        jit_compile="false")
    assert code == 130, err[-2000:]
    assert ("no --init_checkpoint or --albert_hub_module_handle: the encoder starts from random "
            "weights, not a pretrained ALBERT") in caplog.messages
    assert last == (f"run_classifier: stopped at step 1 on SIGINT; nothing after training ran. "
                    f"Rerun the same command to resume from {out}/model.ckpt-1")
    assert (out / "model.ckpt-1.index").exists()
    settings = json.load(open(out / "run.json"))["settings"]  # the data beside the options
    assert (settings["task_name"], settings["data_dir"], settings["train_step"]) == (
        "sst-2", str(world["glue"]), 8)
    for later in ("eval_results.txt", "test_results.tsv", "submit_results.tsv"):
        assert not (out / later).exists()
    assert not export.exists()


# ---- 5. one line, unless the traceback is asked for -----------------------------------------

def test_the_traceback_comes_only_when_asked_for(world, tmp_path, capsys, monkeypatch):
    args = dict(input=world["release"], output_dir=world["release"])
    assert "Traceback" not in run_tool(convert_checkpoint, capsys, **args)[2]
    monkeypatch.setenv("ALBERT_TF_TRACEBACK", "1")
    with pytest.raises(AssertionError, match="Traceback"):  # run_tool refuses tracebacks
        run_tool(convert_checkpoint, capsys, **args)
    assert cli.exit_status(KeyError("a bug")) is None  # a bug keeps its traceback
