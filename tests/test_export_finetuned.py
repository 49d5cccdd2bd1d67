"""run_classifier / run_squad --export_dir: the raw-string serving SavedModels give the
predictions the scripts write, and the TFLite models give the same numbers from ids and from the strings."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from absl import flags

import task_library
import test_run_classifier as rc
import test_run_squad as rs
from albert_tf import AlbertConfig, AlbertEncoder, predict, serving
from albert_tf.formats import litert
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.outputs import OutputRefused
from albert_tf.tasks import GlueTask, SquadTask
from albert_tf.serving import lite
from albert_tf.serving.predictor import PredictError
from albert_tf.tasks.squad import SquadServing
from albert_tf.data.vocab import train_sentencepiece
from conftest import saved_graph
from tool_runner import run_tool_captured, run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

FLAGS = flags.FLAGS


def _serve(export_dir, **texts):
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
    loaded = tf.saved_model.load(str(export_dir))
    fn = loaded.signatures["serving_default"]
    return {k: v.numpy() for k, v in fn(**{k: tf.constant(v) for k, v in texts.items()}).items()}


# Loads an export in a fresh interpreter where `import albert_tf` fails: what a user's server,
# without our package, runs.
_WITHOUT_US = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "albert_tf":
            raise ImportError("albert_tf is not installed here")
sys.meta_path.insert(0, Block())
import tensorflow as tf
import tensorflow_text  # noqa: F401
fn = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
texts = json.loads(sys.stdin.read())
print(json.dumps({k: v.numpy().tolist() for k, v in fn(text_a=tf.constant(texts)).items()
                  if v.dtype != tf.string}))
assert not [m for m in sys.modules if m.split(".")[0] == "albert_tf"]
"""


def _serve_without_our_package(export_dir, texts):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", _WITHOUT_US, str(export_dir)],
                          input=json.dumps(texts), capture_output=True, text=True, env=env,
                          cwd=str(export_dir), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return {k: np.asarray(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


def _tflite(path, input_word_ids, input_mask, input_type_ids):
    """Runs a TFLite model example by example on [1, seq] ids; outputs stacked."""
    interpreter = Interpreter(model_path=str(path))
    runner = interpreter.get_signature_runner()
    rows = [runner(input_word_ids=input_word_ids[i:i + 1], input_mask=input_mask[i:i + 1],
                   input_type_ids=input_type_ids[i:i + 1]) for i in range(len(input_word_ids))]
    return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


def _text_tflite(path, **texts):
    """Runs a string-in TFLite model text by text (inputs shape [1]); outputs stacked."""
    runner = lite.interpreter(model_path=str(path)).get_signature_runner()
    count = len(next(iter(texts.values())))
    rows = [runner(**{k: np.array([v[i].encode()], object) for k, v in texts.items()})
            for i in range(count)]
    return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


def _padded(features, seq_length, keys=("input_word_ids", "input_type_ids")):
    """Flat feature arrays cut by `lengths` and zero-padded to seq_length (+ input_mask)."""
    ends = np.cumsum(features["lengths"])
    out = {}
    for key in keys:
        rows = np.split(features[key].astype(np.int32), ends[:-1])
        out[key] = np.stack([np.pad(r, (0, seq_length - len(r))) for r in rows])
    out["input_mask"] = (np.arange(seq_length)[None] < features["lengths"][:, None]).astype(
        np.int32)
    return out


def _read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t") for line in f]


def _write_tsv(path, header, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join("\t".join(map(str, r)) + "\n" for r in [header] + rows))


# ---- run_classifier -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def glue_assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue_export")
    rc.write_cola(str(root / "data" / "CoLA"), n_train=160, n_dev=32, n_test=24)
    rng = random.Random(3)
    # MRPC/STS-B test layouts: index, (ids, ...), sentence1, sentence2 at the columns the
    # processors read; long pairs so that packing has to trim.
    mrpc = [[i, "a", "b", rc._sentence(rng, i % 2) + " " + rc._sentence(rng, 0),
             rc._sentence(rng, 1)] for i in range(12)]
    _write_tsv(str(root / "data" / "MRPC" / "test.tsv"), ["index", "id1", "id2", "s1", "s2"],
               mrpc)
    sts = [[i, "g", "f", "y", i, "s", "s", rc._sentence(rng, 1), rc._sentence(rng, 0)]
           for i in range(10)]
    _write_tsv(str(root / "data" / "STS-B" / "test.tsv"),
               ["index", "genre", "filename", "year", "old_index", "source1", "source2",
                "sentence1", "sentence2"], sts)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(rc._sentence(rng, i % 2) for i in range(2000)), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 64, do_lower_case=True,
                              hard_vocab_limit=False)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    tf.keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(**{**rc.TINY, "vocab_size": vocab})).save_pretrained(
        str(root / "init"))
    return {"data_dir": str(root / "data"), "spm": spm, "init": str(root / "init"),
            "mrpc": mrpc, "sts": sts}


def _test_sentences(data_dir, task_name):
    from albert_tf.data import glue
    task = glue.get_task(task_name)
    return task, glue.read_examples(data_dir, task, "test")


def _check_tflite_classifier(glue_assets, out, task_name, export_dir, reference, key):
    from albert_tf.data import glue
    tokenizer = load_tokenizer(glue_assets["spm"], True)
    task = GlueTask(glue.get_task(task_name), glue_assets["data_dir"], tokenizer, 32, str(out))
    inputs = _padded(task.features("test"), 32)
    lite = _tflite(export_dir / "classifier.tflite", **inputs)
    assert lite[key].shape == reference.shape
    diff = float(np.max(np.abs(lite[key] - reference)))
    assert diff < 1e-4, diff
    return diff


def test_classifier_export_cola(glue_assets, tmp_path, capsys):
    out, export_dir = tmp_path / "out", tmp_path / "export"
    rc.run(task_name="cola", data_dir=glue_assets["data_dir"], output_dir=out,
           spm_model_file=glue_assets["spm"], init_checkpoint=glue_assets["init"],
           do_train=True, do_eval=True, do_predict=True, train_step=40, warmup_step=5,
           save_checkpoints_steps=20, export_dir=export_dir, threshold_to_export=0.25)
    assert (export_dir / "saved_model.pb").exists() and (export_dir / "classifier.tflite").exists()
    _, examples = _test_sentences(glue_assets["data_dir"], "cola")
    served = _serve(export_dir, text_a=[e.text_a for e in examples])
    assert set(served) == {"probabilities", "labels", "threshold"}
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    submit = [r[1] for r in _read_tsv(out / "submit_results.tsv")[1:]]
    assert [label.decode() for label in served["labels"]] == submit
    np.testing.assert_array_equal(served["threshold"], np.full(len(examples), 0.25, np.float32))
    diff = _check_tflite_classifier(glue_assets, out, "cola", export_dir, probabilities,
                                    "probabilities")
    text = _text_tflite(export_dir / "classifier_text.tflite", text_a=[e.text_a for e in examples])
    np.testing.assert_allclose(text["probabilities"], probabilities, atol=1e-5)
    print(f"cola TFLite max |Δp| = {diff:.2e}")
    # predict --model=<file>.tflite: LiteRT, one text at a time; labels from labels.txt (the
    # ids-in file's tokenizer from the export's asset beside it).
    sentences = [e.text_a for e in examples]
    assert (export_dir / "labels.txt").read_text() == "0\n1\n"
    for name in ("classifier.tflite", "classifier_text.tflite",
                 "classifier_task_library.tflite"):
        got = serving.Classifier(str(export_dir / name))(sentences)
        assert [r["label"] for r in got] == [label.decode() for label in served["labels"]]
        np.testing.assert_allclose([r["probabilities"] for r in got], probabilities, atol=1e-5)
    status, printed, err = run_tool_captured(
        predict, capsys, "--task=classify", f"--model={export_dir / 'classifier_text.tflite'}",
        f"--text={sentences[0]}", "--labels=bad,good")
    assert status == 0, err
    row = json.loads(printed)
    assert row["labels"] == ["bad", "good"] and row["label"] == (
        "good" if probabilities[0, 1] > probabilities[0, 0] else "bad")
    with pytest.raises(PredictError, match="takes sequences of 32"):
        serving.Classifier(str(export_dir / "classifier.tflite"), max_seq_length=16)
    with pytest.raises(PredictError, match="classifies single texts; it takes no second text "
                                         r"\(--text_b, or a second tab-separated column"):
        serving.Classifier(str(export_dir / "classifier_text.tflite"))(["a"], ["b"])

    # Portable: no XLA-compiled functions or oneDNN-only ops (those are chosen on the serving
    # machine), and a Python without our package serves it with the same numbers.
    ops, xla = saved_graph(str(export_dir))
    assert xla == [] and not [op for op in ops if op.startswith("_Mkl")], (xla, ops)
    assert {"SentencepieceTokenizeOp", "MatMul"} <= ops
    elsewhere = _serve_without_our_package(export_dir, [e.text_a for e in examples])
    np.testing.assert_allclose(elsewhere["probabilities"], probabilities, atol=1e-5)

    # Export alone from the same output_dir (model.ckpt-best): same model, no threshold. It
    # replaces the earlier export (its LiteRT files, labels.txt and report too) only with
    # --overwrite_export.
    assert {"labels.txt", "tflite_report.json"} <= {p.name for p in export_dir.iterdir()}
    with pytest.raises(OutputRefused, match="holds a SavedModel export written earlier; pass "
                                            "--overwrite_export to replace it"):
        rc.run(task_name="cola", data_dir=glue_assets["data_dir"], output_dir=out,
               spm_model_file=glue_assets["spm"], export_dir=export_dir)
    rc.run(task_name="cola", data_dir=glue_assets["data_dir"], output_dir=out,
           spm_model_file=glue_assets["spm"], export_dir=export_dir, overwrite_export=True)
    alone = _serve(export_dir, text_a=[e.text_a for e in examples])
    assert set(alone) == {"probabilities", "labels"}
    np.testing.assert_allclose(alone["probabilities"], served["probabilities"], atol=1e-6)

    # Each call pads to its longest text, not to max_seq_length: a text scores the same alone
    # as beside one that fills the whole length.
    texts = [e.text_a for e in examples[:4]]
    with_long = _serve(export_dir, text_a=texts + [" ".join(texts * 8)])["probabilities"]
    one_by_one = np.concatenate([_serve(export_dir, text_a=[t])["probabilities"] for t in texts])
    np.testing.assert_allclose(with_long[:4], one_by_one, atol=1e-5)

    # The TFLite Task Library's BertNLClassifier runs the metadata file as it is, labels inside.
    # Last: where the library has no build for this Python, the test skips here, the rest done.
    lib = task_library.run("classify", export_dir / "classifier_task_library.tflite",
                           [e.text_a for e in examples])
    np.testing.assert_allclose([[r["0"], r["1"]] for r in lib["results"]], probabilities,
                               atol=1e-5)


def test_export_without_litert_skips_only_the_report(glue_assets, tmp_path, monkeypatch):
    """An install without ai-edge-litert (the base package): the export writes every file and
    says why there is no tflite_report.json; running a .tflite says what to install."""
    monkeypatch.setattr(litert, "litert_installed", lambda: False)
    export_dir = tmp_path / "export"
    status, log = run_tool_logged(
        "run_classifier", task_name="cola", data_dir=glue_assets["data_dir"],
        output_dir=tmp_path / "out", spm_model_file=glue_assets["spm"],
        init_checkpoint=glue_assets["init"], do_predict=True, export_dir=export_dir,
        max_seq_length=32, strategy="one_device", mixed_precision="none")
    assert status == 0, log[-3000:]
    for name in ("classifier.tflite", "classifier_text.tflite",
                 "classifier_task_library.tflite", "saved_model.pb"):
        assert (export_dir / name).exists(), name
    assert not (export_dir / "tflite_report.json").exists()
    assert ("No tflite_report.json: running .tflite files needs LiteRT, which is not "
            "installed: pip install 'albert_tf[litert]'") in log
    with pytest.raises(PredictError, match=r"cannot load the LiteRT model .*: running .tflite "
                                           r"files needs LiteRT, .* pip install"):
        serving.Classifier(str(export_dir / "classifier_text.tflite"))


@pytest.mark.parametrize("task_name", ["mrpc", "sts-b"])
def test_classifier_export_pairs_and_regression(glue_assets, tmp_path, task_name):
    """Pair inputs (text_a + text_b, trimmed as the features are) and STS-B's predictions, from
    a predict run with the initial (untrained-head) model."""
    out, export_dir = tmp_path / "out", tmp_path / "export"
    rc.run(task_name=task_name, data_dir=glue_assets["data_dir"], output_dir=out,
           spm_model_file=glue_assets["spm"], init_checkpoint=glue_assets["init"],
           do_predict=True, export_dir=export_dir)
    _, examples = _test_sentences(glue_assets["data_dir"], task_name)
    served = _serve(export_dir, text_a=[e.text_a for e in examples],
                    text_b=[e.text_b for e in examples])
    results = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
    submit = [r[1] for r in _read_tsv(out / "submit_results.tsv")[1:]]
    if task_name == "sts-b":
        assert set(served) == {"predictions"}
        np.testing.assert_allclose(served["predictions"], results[:, 0], atol=1e-5)
        key, reference = "predictions", results[:, 0]
    else:
        assert set(served) == {"probabilities", "labels"}
        np.testing.assert_allclose(served["probabilities"], results, atol=1e-5)
        assert [label.decode() for label in served["labels"]] == submit
        key, reference = "probabilities", results
    # As many texts in each segment, or one line saying so (once an error about an AddN).
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="text_a and text_b must hold as many texts"):
        _serve(export_dir, text_a=[e.text_a for e in examples[:2]], text_b=[examples[0].text_b])
    diff = _check_tflite_classifier(glue_assets, out, task_name, export_dir, reference, key)
    print(f"{task_name} TFLite max diff = {diff:.2e}")
    assert not (export_dir / "classifier_task_library.tflite").exists()  # one text only
    text = _text_tflite(export_dir / "classifier_text.tflite", text_a=[e.text_a for e in examples],
                        text_b=[e.text_b for e in examples])
    np.testing.assert_allclose(np.reshape(text[key], reference.shape), reference, atol=1e-5)


# ---- run_squad ------------------------------------------------------------------------------

SQUAD_SETTINGS = dict(max_seq_length=64, doc_stride=16, max_query_length=12)


@pytest.fixture(scope="module")
def squad_assets(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad_export")
    rng = random.Random(1)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join([rs._paragraph(rng, i % 2)[0] for i in range(1500)]
                                + [rs.QUESTION] * 50), encoding="utf-8")
    spm = train_sentencepiece(str(corpus), str(root / "spm"), 80, do_lower_case=True,
                              hard_vocab_limit=False)
    import sentencepiece
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    tf.keras.utils.set_random_seed(0)
    AlbertEncoder(AlbertConfig(**{**rs.TINY, "vocab_size": vocab})).save_pretrained(
        str(root / "init"))
    files = {}
    for version_2 in (False, True):
        v = "v2" if version_2 else "v1"
        files[v] = (rs.write_squad(str(root / f"train-{v}.json"), 160, 0, version_2),
                    rs.write_squad(str(root / f"dev-{v}.json"), 40, 1, version_2))
    return {"spm": spm, "init": str(root / "init"), "files": files}


def _single_window_features(task, dev):
    """Features of the questions whose context fits one window, and those questions; their
    `chars`: each position's context characters [start, end] (-1 outside the context)."""
    features = task.features(dev, False)
    questions = task.questions(dev, False)
    owner = features["host_question"]
    single = [i for i in range(len(owner)) if np.sum(owner == owner[i]) == 1]
    padded = _padded(features, SQUAD_SETTINGS["max_seq_length"],
                     ("input_word_ids", "input_type_ids", "p_mask"))
    chars = np.stack([features["host_start_char"], features["host_end_char"]], -1)
    chars = [np.pad(r, ((0, SQUAD_SETTINGS["max_seq_length"] - len(r)), (0, 0)),
                    constant_values=-1)
             for r in np.split(chars, np.cumsum(features["lengths"])[:-1])]
    out = {k: v[single] for k, v in padded.items()}
    out["chars"] = np.stack(chars)[single]
    return out, [questions[owner[i]] for i in single]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_squad_export(squad_assets, tmp_path, version):
    from albert_tf.modeling.squad import AlbertSquad
    from albert_tf.tokenization import FullTokenizer

    version_2 = version == "v2"
    train, dev = squad_assets["files"][version]
    out, export_dir = tmp_path / "out", tmp_path / "export"
    rs.run(train_file=train, output_dir=out, spm_model_file=squad_assets["spm"],
           init_checkpoint=squad_assets["init"], do_train=True, train_step=20, warmup_step=2,
           save_checkpoints_steps=20, version_2_with_negative=version_2, export_dir=export_dir,
           predict_file=dev, do_predict=not version_2, do_eval=version_2, **SQUAD_SETTINGS)
    task = SquadTask(FullTokenizer(squad_assets["spm"], True), train, dev,
                     str(tmp_path / "cache"), version_2=version_2, **SQUAD_SETTINGS)
    inputs, questions = _single_window_features(task, dev)
    chars = inputs.pop("chars")
    assert len(questions) >= 10
    model = AlbertSquad.from_pretrained(str(out / "model.ckpt-20"),
                                        config=str(out / "albert_config.json"),
                                        version_2=version_2)
    expected = {k: v.numpy() for k, v in model(inputs, training=False).items()}

    served = _serve(export_dir, question=[q.question for q in questions],
                    context=[q.context for q in questions])
    keys = SquadServing(model).outputs
    assert set(served) == set(keys) | {"input_word_ids", "context_offsets"}
    np.testing.assert_array_equal(served["input_word_ids"], inputs["input_word_ids"])
    for key in keys:
        np.testing.assert_allclose(served[key], expected[key], atol=1e-5, rtol=1e-6)

    lite = _tflite(export_dir / "albert_model.tflite",
                   **{k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    assert set(lite) == set(keys)
    # Not at 384 tokens (nor v2): nothing the Task Library's BertQuestionAnswerer could run.
    assert not (export_dir / "albert_model_task_library.tflite").exists()
    text = _text_tflite(export_dir / "albert_model_text.tflite",
                        question=[q.question for q in questions],
                        context=[q.context for q in questions])
    np.testing.assert_array_equal(text["input_word_ids"], inputs["input_word_ids"])
    # The token-to-character map: each context piece's whitespace word, as UTF-8 bytes, holds
    # the characters the host features give that piece; every other position is (-1, -1). The
    # SavedModel's and the string-in file's are the same.
    ranges = text["context_offsets"]
    np.testing.assert_array_equal(served["context_offsets"], ranges)
    assert ranges.shape == chars.shape
    np.testing.assert_array_equal(ranges[chars[..., 0] < 0], -1)
    for question, spans, host in zip(questions, ranges, chars):
        context = question.context.encode()
        words = [context[a:b] for a, b in spans if a >= 0]
        assert all(w.split() == [w] for w in words), words  # whole words, no whitespace
        assert sorted(set(w.decode() for w in words)) == sorted(set(question.context.split()))
        for (a, b), (first, last) in zip(spans, host):
            if first >= 0:
                assert a <= first and last < b, (a, b, first, last)
    valid = (inputs["p_mask"] == 0) & (inputs["input_mask"] == 1)
    diff = 0.0
    for got in (lite, text):
        for key in keys:
            if key.endswith("_index"):  # the beam's positions (v2)
                np.testing.assert_array_equal(got[key], expected[key])
            elif key in ("start_logits", "end_logits", "start_log_probs"):  # per position
                np.testing.assert_array_less(got[key][~valid], -1e29)
                diff = max(diff, float(np.max(np.abs(got[key][valid] - expected[key][valid]))))
            else:
                diff = max(diff, float(np.max(np.abs(got[key] - expected[key]))))
    assert diff < 1e-4, diff
    print(f"SQuAD {version} TFLite max |Δ| = {diff:.2e}")
    # The export's report scores the .tflite on --predict_file as the run scored it (v1
    # --do_predict; v2 --do_eval, its threshold tuned on half the paragraphs).
    report = json.loads((export_dir / "tflite_report.json").read_text())
    scores = rs._read_kv(out / "eval_results.txt")
    assert report["ids_model"] == report["float32_ids_model"]  # --tflite_quantization=none
    for key in ("exact", "f1", "threshold_f1") if version_2 else ("exact_match", "f1"):
        assert report["ids_model"]["dev"][key] == pytest.approx(float(scores[key]), abs=1e-6)


def test_serving_pads_to_the_longest_text_of_the_call(glue_assets, tmp_path):
    """pad_to_longest (the classifier's export): the model sees [batch, longest]; without it,
    [batch, seq_length]."""
    import keras

    from albert_tf.serving.finetuned import export_text_serving

    class Width(keras.Model):
        def __init__(self):
            super().__init__()
            self.scale = self.add_weight(shape=(), initializer="ones")

        def call(self, inputs, training=False):
            ids = inputs["input_word_ids"]
            return {"width": tf.fill(tf.shape(ids)[:1], tf.shape(ids)[1]) * tf.cast(
                self.scale, tf.int32), "tokens": tf.reduce_sum(inputs["input_mask"], 1)}

    tokenizer = load_tokenizer(glue_assets["spm"], True)
    texts = ["the cat", "the cat sat on a mat while the dog ran far away"]
    tokens = [len(tokenizer.encode(t)) + 2 for t in texts]
    for pad, expected in ((True, max(tokens)), (False, 64)):
        path = tmp_path / f"pad-{pad}"
        export_text_serving(Width(), path, glue_assets["spm"], seq_length=64,
                            pad_to_longest=pad)
        served = _serve(path, text_a=texts)
        assert served["width"].tolist() == [expected] * 2, (pad, tokens)
        assert served["tokens"].tolist() == tokens
    assert _serve(tmp_path / "pad-True", text_a=[" ".join(texts * 20)])["width"].tolist() == [64]
