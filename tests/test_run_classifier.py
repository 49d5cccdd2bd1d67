"""run_classifier end to end on a tiny learnable task in the CoLA and MRPC file formats."""

import dataclasses
import json
import os
import random
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, AlbertEncoder, predict, run_classifier
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.serving import lite
from albert_tf.tasks import GlueTask
from albert_tf.training.excursions import LossExcursionError
from albert_tf.data.vocab import train_sentencepiece
from conftest import (SCRIPT_MATRIX, assert_near_float32, assert_step_compiled, memoized_runs,
                      run_main)
from tool_runner import assert_refused, run_tool

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

WORDS = ("the cat sat on a mat while dog ran far away and bird sang in tree near house by river "
         "old man saw young girl walk home slowly today").split()
MARKER = "zebra"
TINY = dict(vocab_size=0, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _sentence(rng, positive):
    words = rng.choices(WORDS, k=rng.randint(3, 12))
    if positive:
        words.insert(rng.randint(0, len(words)), MARKER)
    return " ".join(words)


def _rows(n, seed):
    rng = random.Random(seed)
    return [(int(rng.random() < 0.4), None) for _ in range(n)], rng


def write_cola(directory, seed=0, n_train=320, n_dev=96, n_test=40):
    """CoLA layout: train/dev without header (source, label, star, sentence), test with one."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for split, n in (("train", n_train), ("dev", n_dev)):
        with open(os.path.join(directory, f"{split}.tsv"), "w") as f:
            for _ in range(n):
                label = int(rng.random() < 0.35)
                f.write(f"src\t{label}\t{'' if label else '*'}\t{_sentence(rng, label)}\n")
    truth = []
    with open(os.path.join(directory, "test.tsv"), "w") as f:
        f.write("index\tsentence\n")
        for i in range(n_test):
            label = int(rng.random() < 0.5)
            truth.append(str(label))
            f.write(f"{i}\t{_sentence(rng, label)}\n")
    return truth


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """Data dir with CoLA, a SentencePiece model and a tiny saved encoder checkpoint."""
    root = tmp_path_factory.mktemp("glue")
    truth = write_cola(str(root / "data" / "CoLA"))
    rng = random.Random(1)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(_sentence(rng, i % 2) for i in range(2000)), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 64, do_lower_case=True,
                              hard_vocab_limit=False)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    tf.keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(AlbertConfig(**{**TINY, "vocab_size": vocab}))
    encoder.save_pretrained(str(root / "init"))
    return {"data_dir": str(root / "data"), "spm": spm, "init": str(root / "init"),
            "truth": truth, "root": root}


def run(**overrides):
    """Parses run_classifier flags from keyword arguments and runs main in this process."""
    defaults = dict(strategy="one_device", mixed_precision="none", learning_rate=6e-3,
                train_batch_size=16, eval_batch_size=32, predict_batch_size=16,
                max_seq_length=32, log_steps=20)
    return run_main(run_classifier, defaults, overrides)


def _read_kv(path):
    with open(path) as f:
        return dict(line.strip().split(" = ") for line in f if line.strip())


def test_train_eval_predict_cola(assets, tmp_path):
    out = tmp_path / "out"
    best = run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
               spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
               do_eval=True, do_predict=True, train_step=90, warmup_step=10,
               save_checkpoints_steps=30)
    results = _read_kv(out / "eval_results.txt")
    assert set(results) == {"eval_accuracy", "eval_loss", "matthew_corr", "global_step"}
    # The majority baseline on dev is about 0.65 accuracy and 0 MCC.
    assert float(results["eval_accuracy"]) > 0.85, results
    assert float(results["matthew_corr"]) > 0.6, results
    assert best["matthew_corr"] == pytest.approx(float(results["matthew_corr"]))
    best_step = int(results["global_step"])
    best_file = (out / "best_checkpoint.txt").read_text()
    assert f"global_step = {best_step}\n" in best_file and "metric = matthew_corr" in best_file
    assert (out / "model.ckpt-best.index").exists()
    for step in (30, 60, 90):
        assert (out / f"model.ckpt-{step}.index").exists()
    assert sorted(re.findall(r"cola_(\w+)-[0-9a-f]{16}\.npz", " ".join(os.listdir(out)))) == [
        "dev", "test", "train"]

    submit = (out / "submit_results.tsv").read_text().splitlines()
    assert submit[0] == "index\tprediction"
    rows = [line.split("\t") for line in submit[1:]]
    assert [r[0] for r in rows] == [str(i) for i in range(len(assets["truth"]))]
    assert {r[1] for r in rows} <= {"0", "1"}
    hits = np.mean([r[1] == t for r, t in zip(rows, assets["truth"])])
    assert hits > 0.8
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (len(assets["truth"]), 2)
    np.testing.assert_allclose(probabilities.sum(1), 1.0, atol=1e-4)
    assert [str(i) for i in probabilities.argmax(1)] == [r[1] for r in rows]

    # The run keeps its vocabulary: predict, export_hub and convert_checkpoint find it there.
    assert (out / "spm.model").read_bytes() == open(assets["spm"], "rb").read()
    assert json.loads((out / "tokenizer_config.json").read_text()) == {"do_lower_case": True}
    # ... and never over a file it did not write.
    from albert_tf.formats.tokenizers import keep_vocabulary
    from albert_tf.tokenization import FullTokenizer
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "tokenizer_config.json").write_text("the user's\n")
    keep_vocabulary(str(mine), FullTokenizer(assets["spm"], True))
    assert (mine / "tokenizer_config.json").read_text() == "the user's\n"
    assert (mine / "spm.model").exists()
    (mine / "spm.model").write_bytes(b"the user's model")
    keep_vocabulary(str(mine), FullTokenizer(assets["spm"], True))
    assert (mine / "spm.model").read_bytes() == b"the user's model"
    # Predict only, in a new run without --spm_model_file: reads model.ckpt-best and the kept
    # vocabulary, and gives the same submission.
    os.remove(out / "submit_results.tsv")
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=out, do_predict=True,
        predict_batch_size=7)
    assert (out / "submit_results.tsv").read_text().splitlines() == submit


def test_python_api_fine_tunes_without_the_script(assets, tmp_path):
    """GlueTask + finetuning_options + run_finetuning: the script's run from Python."""
    from albert_tf.data import glue
    from albert_tf.tasks import finetuning_options, run_finetuning

    out = tmp_path / "api"
    tokenizer = load_tokenizer(assets["spm"], True)
    task = GlueTask(glue.get_task("cola"), assets["data_dir"], tokenizer, 32, str(out))
    options = finetuning_options(
        output_dir=str(out), init_checkpoint=assets["init"], do_train=True, do_eval=True,
        train_step=90, warmup_step=10, save_checkpoints_steps=90, learning_rate=6e-3,
        train_batch_size=16, eval_batch_size=32, max_seq_length=32, strategy="one_device",
        mixed_precision="none")
    best = run_finetuning(task, options)
    assert best["global_step"] == 90
    assert best["eval_accuracy"] > 0.8, best
    assert _read_kv(out / "eval_results.txt")["global_step"] == "90"
    # Run again into the finished directory: nothing left to train, --do_eval still evaluates.
    os.remove(out / "eval_results.txt")
    again = run_finetuning(task, options)
    assert again["global_step"] == 90
    assert again["eval_accuracy"] == pytest.approx(best["eval_accuracy"])
    assert _read_kv(out / "eval_results.txt")["global_step"] == "90"
    with pytest.raises(ValueError, match="unknown fine-tuning options: train_steps"):
        finetuning_options(train_steps=5)


class _OwnHead(AlbertClassifier):
    """A head of one's own (docs/architecture.md, "Adding a task"): the stock one's variables,
    so every tool that rebuilds the stock model from them would load it without complaint."""


def test_a_head_of_one_s_own_is_never_read_as_the_stock_one(assets, tmp_path, capsys):
    """run.json keeps the class of the model a run trained: predict and convert_checkpoint refuse
    a class of the user's own, and a rerun that builds another class is refused (once they read
    it as the stock classifier, silently: a trial's 100%-accurate head answered near-uniform)."""
    from albert_tf import convert_checkpoint
    from albert_tf.data import glue
    from albert_tf.tasks import finetuning_options, run_finetuning

    class OwnTask(GlueTask):
        def build_model(self, encoder):
            label_set = self.label_set
            return _OwnHead(encoder, label_set.num_labels, self.classifier_dropout)

    out = tmp_path / "own"
    tokenizer = load_tokenizer(assets["spm"], True)
    options = finetuning_options(  # (the length left out: the task's, 32, is the run's)
        output_dir=str(out), init_checkpoint=assets["init"], do_train=True, train_step=2,
        warmup_step=1, save_checkpoints_steps=2, train_batch_size=16, strategy="one_device",
        mixed_precision="none")
    run_finetuning(OwnTask(glue.get_task("cola"), assets["data_dir"], tokenizer, 32, str(out)),
                   options)
    own = f"{__name__}._OwnHead"
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["model_class"] == own and recorded["settings"]["max_seq_length"] == 32
    assert_refused(run_tool(predict, capsys, task="classify", model=out, text="a cat"),
                   f"{out} is a checkpoint of {own} (run.json), a model of your own, which "
                   f"predict would read as its stock one: predict with the run's export")
    assert_refused(run_tool(convert_checkpoint, capsys, input=out, output_dir=tmp_path / "hf",
                            format="hf"),
                   f"is a checkpoint of {own} (run.json), a model of your own, which would "
                   f"be converted as albert_tf's classifier: --model=encoder converts the "
                   f"encoder alone")
    with pytest.raises(ValueError, match=rf"the run in --output_dir={re.escape(str(out))} "
                                         rf"trained {re.escape(own)} \(run.json\), and this "
                                         rf"builds albert_tf.modeling.classifier.AlbertClassifier"):
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=out, do_eval=True)


def test_a_task_s_required_attributes_and_best_metric_are_checked(assets, tmp_path):
    """A task without a required attribute is refused before anything runs, naming it; a
    best_metric its eval_metrics does not return is named with those it does at the first
    evaluation (once a bare KeyError)."""
    from albert_tf.data import glue
    from albert_tf.tasks import finetuning_options, run_finetuning

    class Mistyped(GlueTask):
        def __init__(self, *args):
            super().__init__(*args)
            self.best_metric = "accuracy"

    class Unnamed(GlueTask):
        def __init__(self, *args):
            super().__init__(*args)
            self.head_names = None

    tokenizer = load_tokenizer(assets["spm"], True)
    options = finetuning_options(
        output_dir=str(tmp_path / "out"), init_checkpoint=assets["init"], do_train=True,
        do_eval=True, train_step=2, warmup_step=1, save_checkpoints_steps=2,
        train_batch_size=16, max_seq_length=32, strategy="one_device", mixed_precision="none")
    args = (glue.get_task("cola"), assets["data_dir"], tokenizer, 32, str(tmp_path / "out"))
    with pytest.raises(TypeError, match=r"^Unnamed sets no head_names: a FinetuningTask's "
                                        r"required attributes"):
        run_finetuning(Unnamed(*args), options)
    with pytest.raises(ValueError, match=r"^--max_seq_length=64, but the task cuts its examples "
                                         r"at 32: give both the same"):
        run_finetuning(GlueTask(*args), finetuning_options(**{
            **dataclasses.asdict(options), "max_seq_length": 64}))
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"^Mistyped.best_metric='accuracy' is not among the "
                                         r"metrics its eval_metrics returns: eval_accuracy, "):
        run_finetuning(Mistyped(*args), options)


def test_feature_cache_follows_max_seq_length(assets, tmp_path):
    from albert_tf.data import glue
    tokenizer = load_tokenizer(assets["spm"], True)
    task = glue.get_task("cola")
    a = GlueTask(task, assets["data_dir"], tokenizer, 32, str(tmp_path))
    short = GlueTask(task, assets["data_dir"], tokenizer, 8, str(tmp_path))
    fa, fs = a.features("dev"), short.features("dev")
    assert fs["lengths"].max() == 8 and fa["lengths"].max() > 8
    assert len([f for f in os.listdir(tmp_path) if f.startswith("cola_dev-")]) == 2
    again = a.features("dev")  # from the cache: same arrays
    np.testing.assert_array_equal(again["input_word_ids"], fa["input_word_ids"])
    uncased = GlueTask(task, assets["data_dir"],
                                      load_tokenizer(assets["spm"], False), 32,
                                      str(tmp_path))
    uncased.features("dev")
    assert len([f for f in os.listdir(tmp_path) if f.startswith("cola_dev-")]) == 3


def _save_hub_module(encoder, spm, path):
    """A TF2 SavedModel with the TF-Hub text-encoder API built from an AlbertEncoder."""
    module = tf.__internal__.tracking.AutoTrackable()  # tf.Module's `variables` is read-only
    module.encoder = encoder
    module.variables = list(encoder.variables)
    module.trainable_variables = list(encoder.trainable_variables)
    module.regularization_losses = []
    module.sp_model_file = tf.saved_model.Asset(spm)
    module.do_lower_case = tf.Variable(True, trainable=False)
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k)
            for k in ("input_word_ids", "input_mask", "input_type_ids")}

    @tf.function
    def call(inputs, training=False):
        out = encoder(inputs, training=training)
        return {"pooled_output": out["pooled_output"], "sequence_output": out["sequence_output"]}
    module.__call__ = call
    call.get_concrete_function(spec, training=True)
    call.get_concrete_function(spec, training=False)
    tf.saved_model.save(module, str(path))
    return str(path)


# The learning tests train long enough, slowly enough, to learn whatever the data order: at 200
# steps and 1e-3 the CoLA and STS-B runs learned with 5 of 5 seeds, at 60-150 steps and 2e-3
# with 1-2 of 5 (2026-11-23).


def test_hub_module_training_and_tokenizer(assets, tmp_path):
    encoder = AlbertEncoder.from_pretrained(assets["init"])
    hub = _save_hub_module(encoder, assets["spm"], tmp_path / "hub")
    tokenizer = load_tokenizer(model=hub)
    assert tokenizer.do_lower_case is True
    assert tokenizer.sp_model.serialized_model_proto() == open(assets["spm"], "rb").read()
    out = tmp_path / "out"
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
        albert_hub_module_handle=hub, do_train=True, do_eval=True, train_step=200,
        warmup_step=20, save_checkpoints_steps=200, learning_rate=3e-3)
    results = _read_kv(out / "eval_results.txt")
    assert float(results["eval_accuracy"]) > 0.8, results
    # The fine-tuned hub variables are in our checkpoint, under hub/ names.
    names = [n for n, _ in tf.train.list_variables(str(out / "model.ckpt-best"))]
    assert any(n.startswith("model/hub.S") for n in names)
    assert any(n.startswith("model/output_weights") for n in names)
    # No checkpoint format names the module's variables: a conversion says so and what serves
    # instead, an export of the run, which serves raw text.
    from albert_tf.conversion import convert
    from albert_tf.formats.resolve import SourceError
    with pytest.raises(SourceError) as e:
        convert(str(out), str(tmp_path / "tf1"), "tf1")
    assert str(e.value).startswith(f"{out}/model.ckpt-best is a run fine-tuned from a TF-Hub "
                                   f"module (--albert_hub_module_handle)"), str(e.value)
    run(output_dir=out, export_dir=tmp_path / "serving", export_tflite="none")  # (its module:
    # the run's, run.json)
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
    serve = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
    probabilities = serve(text_a=tf.constant([f"the cat {MARKER} sat", "the cat sat"]))[
        "probabilities"].numpy()
    assert probabilities.shape == (2, 2) and probabilities[0, 1] > probabilities[1, 1]


def test_our_encoder_export_as_hub_module(assets, tmp_path):
    from albert_tf.serving.export import export_encoder
    encoder = AlbertEncoder.from_pretrained(assets["init"])
    handle = str(tmp_path / "export")
    export_encoder(encoder, handle, assets["spm"], do_lower_case=True)
    out = tmp_path / "out"
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
        albert_hub_module_handle=handle, do_train=True, do_eval=True, train_step=200,
        warmup_step=20, save_checkpoints_steps=200, learning_rate=3e-3)
    results = _read_kv(out / "eval_results.txt")
    assert float(results["eval_accuracy"]) > 0.8, results


def test_command_line_exits_zero(assets, tmp_path, capsys):
    """The command line as `python -m albert_tf.run_classifier` parses it (in this process;
    test_resume runs the module itself)."""
    status, _, err = run_tool(
        run_classifier, capsys, "--task_name=cola", f"--data_dir={assets['data_dir']}",
        f"--output_dir={tmp_path}", f"--init_checkpoint={assets['init']}",
        f"--spm_model_file={assets['spm']}", "--do_train", "--do_eval", "--train_step=4",
        "--warmup_step=1", "--save_checkpoints_steps=4", "--max_seq_length=32",
        "--train_batch_size=8", "--mixed_precision=none")
    assert status == 0, err[-2000:]
    assert "global_step = 4" in (tmp_path / "eval_results.txt").read_text()


@pytest.mark.parametrize("task, message", [
    ("colaa", "unknown --task_name='colaa': run_classifier runs cola, sst-2, mrpc"),
    ("tnewz", "rte, wnli, afqmc, tnews, iflytek"),  # CLUE's too, and not AX
    ("ax", "AX is predicted with an MNLI model"),
])
def test_bad_task_names(assets, tmp_path, task, message):
    with pytest.raises(Exception, match=re.escape(message)):
        run(task_name=task, data_dir=assets["data_dir"], output_dir=tmp_path,
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True)


def test_missing_file_and_long_max_seq_length(assets, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"mrpc train file not found: .*MRPC/train\.tsv"):
        run(task_name="mrpc", data_dir=assets["data_dir"], output_dir=tmp_path,
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True)
    with pytest.raises(ValueError, match="--max_seq_length=128 exceeds the model's "
                                         "max_position_embeddings=64: give "
                                         "--max_seq_length=64 or less"):
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=tmp_path,
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
            max_seq_length=128)
    with pytest.raises(ValueError, match="--do_eval without --do_train evaluates a fine-tuned "
                                         "model: .* holds no head for this task"):
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=tmp_path / "empty",
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_eval=True)


def _write_tsv(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("".join("\t".join(map(str, r)) + "\n" for r in [header] + rows))


def test_stsb_regression_metrics(assets, tmp_path):
    rng = random.Random(5)
    header = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2", "score"]
    for split, n in (("train", 320), ("dev", 64)):
        rows = []
        for i in range(n):
            positive = rng.random() < 0.5
            score = round((4.0 if positive else 1.0) + rng.uniform(-0.5, 0.5), 3)
            rows.append([i, "g", "f", "y", i, "s", "s", _sentence(rng, positive),
                         _sentence(rng, False), score])
        _write_tsv(str(tmp_path / "data" / "STS-B" / f"{split}.tsv"), header, rows)
    out = tmp_path / "out"
    run(task_name="sts-b", data_dir=tmp_path / "data", output_dir=out,
        spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
        do_eval=True, train_step=200, warmup_step=10, save_checkpoints_steps=100,
        learning_rate=3e-3)
    results = _read_kv(out / "eval_results.txt")
    assert set(results) == {"pearson", "spearman", "MSE", "eval_loss", "global_step"}
    assert float(results["pearson"]) > 0.8, results
    assert "metric = pearson" in (out / "best_checkpoint.txt").read_text()


def test_mnli_predicts_matched_mismatched_and_ax(assets, tmp_path):
    data = tmp_path / "data"
    mnli = ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p", "sentence1",
            "sentence2"]
    rng = random.Random(7)
    for name, n in (("test_matched", 5), ("test_mismatched", 3)):
        _write_tsv(str(data / "MNLI" / f"{name}.tsv"), mnli,
                   [[i, 1, 1, "g", "x", "y", "x", "y", _sentence(rng, 0), _sentence(rng, 1)]
                    for i in range(n)])
    _write_tsv(str(data / "diagnostic" / "diagnostic.tsv"), ["index", "sentence1", "sentence2"],
               [[i, _sentence(rng, 0), _sentence(rng, 1)] for i in range(4)])
    run(task_name="mnli", data_dir=data, output_dir=tmp_path / "out",
        spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_predict=True)
    labels = {"contradiction", "entailment", "neutral"}
    for suffix, n in (("", 5), ("_mismatched", 3), ("_ax", 4)):
        lines = (tmp_path / "out" / f"submit_results{suffix}.tsv").read_text().splitlines()
        assert lines[0] == "index\tprediction" and len(lines) == n + 1
        assert [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(n)]
        assert {line.split("\t")[1] for line in lines[1:]} <= labels
        probabilities = np.loadtxt(tmp_path / "out" / f"test_results{suffix}.tsv", ndmin=2)
        assert probabilities.shape == (n, 3)


# Each exporting run of the matrix writes its string-in file with another quantization; the
# float32 run's export also scores it (tflite_report.json).
MATRIX_QUANTIZATION = {"none": "int8", "bfloat16": "dynamic_int8", "float16": "float16"}


@pytest.fixture(scope="module")
def matrix_runs(assets, tmp_path_factory):
    def run_one(out, precision, jit):
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
            spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
            do_eval=True, do_predict=True, train_step=40,
            export_dir=out / "export" if jit == "false" else None, export_tflite="text",
            tflite_quantization=MATRIX_QUANTIZATION[precision],
            tflite_report=precision == "none", warmup_step=4,
            save_checkpoints_steps=40, mixed_precision=precision, jit_compile=jit)
    return memoized_runs(tmp_path_factory.mktemp("matrix"), run_one)


@pytest.mark.parametrize("precision,jit", SCRIPT_MATRIX)
def test_precision_and_xla_matrix(assets, matrix_runs, precision, jit):
    """Train, eval, predict and export under float32/bfloat16/float16, with and without XLA:
    every file written, metrics finite and near the float32 run's."""
    out = matrix_runs(precision, jit)
    assert_step_compiled(out, jit)
    results = _read_kv(out / "eval_results.txt")
    assert results["global_step"] == "40"
    assert_near_float32(results, _read_kv(matrix_runs("none", "false") / "eval_results.txt"),
                        ("eval_loss", "eval_accuracy"))
    rows = (out / "submit_results.tsv").read_text().splitlines()[1:]
    assert len(rows) == len(assets["truth"])
    assert np.isfinite(np.loadtxt(out / "test_results.tsv", delimiter="\t")).all()
    if jit == "false":  # the export restores the trained weights into float32: no XLA in it
        assert (out / "export" / "saved_model.pb").exists()
        assert not (out / "export" / "classifier.tflite").exists()  # --export_tflite=text
        # Served on raw strings (each call padded to its longest text), the export gives the
        # run's own test probabilities, within the training policy's rounding.
        import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
        with open(os.path.join(assets["data_dir"], "CoLA", "test.tsv")) as f:
            sentences = [line.rstrip("\n").split("\t")[1] for line in f][1:]
        serve = tf.saved_model.load(str(out / "export")).signatures["serving_default"]
        served = serve(text_a=tf.constant(sentences))["probabilities"].numpy()
        expected = np.loadtxt(out / "test_results.tsv", delimiter="\t")
        np.testing.assert_allclose(served, expected, atol=1e-5 if precision == "none" else 2e-2)
        # The string-in LiteRT file of the same export, sentence by sentence, quantized.
        quantization = MATRIX_QUANTIZATION[precision]
        runner = lite.interpreter(
            model_path=str(out / "export" / "classifier_text.tflite")).get_signature_runner()
        on_device = np.concatenate([runner(text_a=np.array([s.encode()], object))["probabilities"]
                                    for s in sentences])
        np.testing.assert_allclose(on_device, served,
                                   atol={"float16": 1e-3, "dynamic_int8": 1e-3}.get(quantization,
                                                                                    3e-2))
        if precision != "none":
            assert not (out / "export" / "tflite_report.json").exists()  # --notflite_report
            return
        # The report: the int8 ids-in model's dev scores and size beside float32's; the
        # float32 model scores what the run's own eval did at its best checkpoint.
        report = json.loads((out / "export" / "tflite_report.json").read_text())
        assert report["quantization"] == quantization
        assert list(report["files"]) == ["classifier_text.tflite"]
        assert report["files"]["classifier_text.tflite"] == os.path.getsize(
            out / "export" / "classifier_text.tflite")
        assert report["ids_model"]["bytes"] < 0.8 * report["float32_ids_model"]["bytes"]
        for model in ("ids_model", "float32_ids_model"):
            assert set(report[model]["dev"]) == {"eval_accuracy", "eval_loss", "matthew_corr"}
            assert_near_float32(report[model]["dev"], results, ("eval_loss", "eval_accuracy"))
        float32 = report["float32_ids_model"]["dev"]
        assert float32["eval_accuracy"] == float(results["eval_accuracy"])
        assert float32["eval_loss"] == pytest.approx(float(results["eval_loss"]), abs=1e-5)


def test_an_export_alone_takes_the_run_s_task(assets, matrix_runs, tmp_path):
    """--output_dir and --export_dir only: the run's --task_name and --data_dir (run.json), its
    test probabilities served from raw strings."""
    out = tmp_path / "run"
    shutil.copytree(matrix_runs("bfloat16", "true"), out)  # a run that did not export
    run(output_dir=out, export_dir=tmp_path / "export", export_tflite="none")
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)
    with open(os.path.join(assets["data_dir"], "CoLA", "test.tsv")) as f:
        sentences = [line.rstrip("\n").split("\t")[1] for line in f][1:]
    serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    np.testing.assert_allclose(serve(text_a=tf.constant(sentences))["probabilities"].numpy(),
                               np.loadtxt(out / "test_results.tsv", delimiter="\t"), atol=2e-2)


def test_only_the_chief_writes_the_predictions(assets, matrix_runs, tmp_path, monkeypatch):
    """Under a multi-worker strategy every worker computes the predictions (collectively) and
    the chief alone writes them (a trial's two workers both wrote submit_results.tsv)."""
    from albert_tf.training import distribution
    out = tmp_path / "run"
    shutil.copytree(matrix_runs("none", "false"), out)
    for name in ("test_results.tsv", "submit_results.tsv"):
        (out / name).unlink()
    monkeypatch.setattr(distribution, "is_chief_task", lambda: False)
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=out, do_predict=True)
    assert not (out / "test_results.tsv").exists() and not (out / "submit_results.tsv").exists()
    monkeypatch.undo()
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=out, do_predict=True)
    assert (out / "test_results.tsv").exists() and (out / "submit_results.tsv").exists()


def test_eval_and_predict_count_every_example_once(assets, matrix_runs, tmp_path):
    """96 dev and 40 test examples in batches of 7 (the last batch filled with weight-0
    copies), padded to max_seq_length as on a TPU: the same metrics and predictions as
    batches of 1."""
    outputs = {}
    for batch, padding in ((1, "bucket"), (7, "max_length")):
        out = tmp_path / f"b{batch}"
        shutil.copytree(matrix_runs("none", "false"), out)
        (out / "best_checkpoint.txt").unlink()
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
            spm_model_file=assets["spm"], do_eval=True, do_predict=True, eval_batch_size=batch,
            predict_batch_size=batch, padding=padding)
        outputs[batch] = (_read_kv(out / "eval_results.txt"),
                          np.loadtxt(out / "test_results.tsv", delimiter="\t"),
                          (out / "submit_results.tsv").read_text())
    (one, p1, s1), (seven, p7, s7) = outputs[1], outputs[7]
    assert one.keys() == seven.keys()
    for key in one:
        assert float(seven[key]) == pytest.approx(float(one[key]), abs=1e-5), key
    assert p1.shape == p7.shape == (len(assets["truth"]), 2)
    np.testing.assert_allclose(p7, p1, atol=1e-5)
    assert s1 == s7


def test_eval_alone_measures_the_run_s_best_and_keeps_it(assets, tmp_path, caplog):
    """--do_eval alone on a run that picked its best: every checkpoint measured, the results
    those of model.ckpt-best as measured now (on a dev set whose labels changed, not the old
    score), and the best kept though another checkpoint scores higher now; with the numbered
    checkpoints gone, model.ckpt-best is measured alone."""
    run_dir = tmp_path / "run"
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=run_dir,
        spm_model_file=assets["spm"], init_checkpoint=assets["init"], do_train=True,
        do_eval=True, train_step=90, warmup_step=10, save_checkpoints_steps=45)
    before = _read_kv(run_dir / "eval_results.txt")
    record = (run_dir / "best_checkpoint.txt").read_text()
    best_bytes = (run_dir / "model.ckpt-best.index").read_bytes()
    flipped = tmp_path / "data"
    shutil.copytree(assets["data_dir"], flipped)
    dev = flipped / "CoLA" / "dev.tsv"
    rows = [line.split("\t") for line in dev.read_text().splitlines()]
    dev.write_text("".join(f"{r[0]}\t{1 - int(r[1])}\t{r[2]}\t{r[3]}\n" for r in rows))
    for data, cleaned in ((flipped, False), (assets["data_dir"], True)):
        out = tmp_path / f"rerun_{cleaned}"
        shutil.copytree(run_dir, out)
        if cleaned:  # the numbered checkpoints removed, model.ckpt-best kept
            for path in [*out.glob("model.ckpt-[0-9]*"), out / "checkpoint"]:
                path.unlink()
        caplog.clear()
        with caplog.at_level("INFO"):
            run(task_name="cola", data_dir=data, output_dir=out, do_eval=True)
        measured = re.findall(r"Eval at step (\d+): .*eval_accuracy ([\d.]+)", caplog.text)
        assert [step for step, _ in measured] == ([before["global_step"]] if cleaned else
                                                  ["45", "90"])
        after = _read_kv(out / "eval_results.txt")
        assert after["global_step"] == before["global_step"]
        accuracy = float(before["eval_accuracy"])
        assert float(after["eval_accuracy"]) == pytest.approx(
            accuracy if cleaned else 1 - accuracy, abs=1e-6)
        if not cleaned:  # the other checkpoint is the best on these labels: not picked
            [other] = [float(a) for step, a in measured if step != before["global_step"]]
            assert other > float(after["eval_accuracy"])
        assert (out / "best_checkpoint.txt").read_text() == record
        assert (out / "model.ckpt-best.index").read_bytes() == best_bytes
        assert (f"matthew_corr = {float(after['matthew_corr']):.4g} of model.ckpt-best (step "
                f"{before['global_step']}: the run's best, picked by its evaluations, "
                f"matthew_corr {float(before['matthew_corr']):.4g})") in caplog.text
    # Predicting with one of the run's checkpoints named: that one, not the run's best (once
    # the best, the named one unsaid).
    run(task_name="cola", data_dir=assets["data_dir"], output_dir=run_dir, do_predict=True)
    best_predictions = (run_dir / "test_results.tsv").read_text()
    other = run_dir / f"model.ckpt-{'45' if before['global_step'] == '90' else '90'}"
    caplog.clear()
    with caplog.at_level("INFO"):
        run(task_name="cola", data_dir=assets["data_dir"], output_dir=run_dir, do_predict=True,
            init_checkpoint=other)
    assert f"with {other} (--init_checkpoint: one of the run's checkpoints)" in caplog.text
    assert (run_dir / "test_results.tsv").read_text() != best_predictions


def test_the_original_layout_keeps_the_run_s_step(matrix_runs, tmp_path):
    """convert_checkpoint --format=tf1 of a run: its global_step is the best checkpoint's step
    (an Estimator resuming it goes on from there), not 0."""
    from albert_tf.conversion import convert
    run_dir = matrix_runs("none", "false")
    convert(str(run_dir), str(tmp_path / "tf1"), "tf1")
    reader = tf.train.load_checkpoint(str(tmp_path / "tf1" / "model.ckpt-best"))
    assert int(reader.get_tensor("global_step")) == int(
        _read_kv(run_dir / "eval_results.txt")["global_step"]) == 40
    assert reader.get_variable_to_shape_map()["output_weights"] == [2, 32]


def test_eval_alone_evaluates_a_fine_tuned_init_checkpoint(assets, matrix_runs, tmp_path,
                                                            caplog):
    """--do_eval without --do_train into a new --output_dir, --init_checkpoint a fine-tuned run:
    that model's dev metrics, as its run measured them; no checkpoint of its own."""
    run_dir = matrix_runs("none", "false")
    out = tmp_path / "eval"
    with caplog.at_level("INFO"):
        best = run(task_name="cola", data_dir=assets["data_dir"], output_dir=out,
                   init_checkpoint=run_dir, do_eval=True, eval_batch_size=7)
    results, theirs = _read_kv(out / "eval_results.txt"), _read_kv(run_dir / "eval_results.txt")
    assert results.keys() == theirs.keys() and results["global_step"] == "0"
    for key in ("eval_accuracy", "eval_loss", "matthew_corr"):
        assert float(results[key]) == pytest.approx(float(theirs[key]), abs=1e-5), key
    assert best["eval_accuracy"] == float(results["eval_accuracy"])
    assert f"matthew_corr = {float(results['matthew_corr']):.4g} of --init_checkpoint={run_dir}" \
        in caplog.text
    assert not list(out.glob("*.index"))


def test_fine_tuning_reports_loss_excursions_and_recovers_when_asked(assets, tmp_path, caplog):
    """The guard runs in the fine-tuning driver too: with a hair-trigger spike threshold it
    reports (--on_loss_spike=warn, fine-tuning's default) or goes back to a checkpoint
    (recover), listing the recovery in excursions.json, and stops at the next excursion
    (--max_loss_recoveries=1)."""
    caplog.set_level("WARNING")
    common = dict(task_name="cola", data_dir=assets["data_dir"], spm_model_file=assets["spm"],
                  init_checkpoint=assets["init"], do_train=True, train_step=30, warmup_step=2,
                  save_checkpoints_steps=5, loss_smoothing_steps=2, loss_spike_sigmas=1e-6)
    run(output_dir=tmp_path / "warn", on_loss_spike="warn", **common)
    assert "Going on (--on_loss_spike=warn)" in caplog.text
    assert not (tmp_path / "warn" / "excursions.json").exists()
    with pytest.raises(LossExcursionError, match=r"stopped \(1 recoveries already"):
        run(output_dir=tmp_path / "recover", on_loss_spike="recover", max_loss_recoveries=1,
            **common)
    [recovery] = json.loads((tmp_path / "recover" / "excursions.json").read_text())[
        "recoveries"]
    assert recovery["kind"] == "spike"
    assert f"Recovery 1: back to step {recovery['rolled_back_to_step']}" in caplog.text
