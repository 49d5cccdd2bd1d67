"""The task models in Keras's own loop: compile with standard losses and metrics, fit, evaluate
and predict on NumPy and tf.data under every policy, and .keras files from every checkpoint
format we read."""

import contextlib
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer, create_optimizer
from albert_tf.data.synthetic import pretraining_batch
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
from albert_tf.modeling.squad import AlbertSquad
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from conftest import SMALL, TINY

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
SCCE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.fixture
def policy(request):
    keras.mixed_precision.set_global_policy(request.param)
    yield request.param
    keras.mixed_precision.set_global_policy("float32")


def _sentences(n, seq=12, seed=0):
    """Ids with padding; label 1 when token 7 occurs (a rule a tiny model learns in steps)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(8, TINY["vocab_size"], (n, seq)).astype(np.int32)
    labels = rng.integers(0, 2, n).astype(np.int32)
    lengths = rng.integers(6, seq + 1, n)
    for i in range(n):
        if labels[i]:
            ids[i, rng.integers(1, lengths[i] - 1)] = 7
        ids[i, lengths[i]:] = 0
    mask = (ids != 0).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids)}, labels


# Each policy op by op, and bfloat16 compiled with XLA as Keras compiles on a TPU or GPU.
@pytest.mark.parametrize("policy,jit", [(p, False) for p in POLICIES] + [("mixed_bfloat16", True)],
                         indirect=["policy"])
def test_classifier_compile_fit_evaluate_predict(policy, jit):
    keras.utils.set_random_seed(1)
    x, y = _sentences(64)
    model = AlbertClassifier(AlbertConfig(**SMALL), num_labels=2, classifier_dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=SCCE, metrics=["accuracy"],
                  jit_compile=jit)
    assert model.jit_compile is jit
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    before = model.evaluate(x, y, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=16, epochs=12, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    after = model.evaluate(dataset, verbose=0, return_dict=True)
    assert after["loss"] < before["loss"] - 0.1, (before, after)
    assert after["accuracy"] >= 0.75, after
    out = model.predict(dataset, verbose=0)
    assert out["probabilities"].shape == (64, 2) and out["logits"].dtype == np.float32
    np.testing.assert_allclose(out["probabilities"].sum(-1), 1.0, atol=1e-5)
    # Keras's loss is the standard cross-entropy of the logits (the model's own, too).
    expected = float(np.mean(SCCE(y, out["logits"])))
    assert after["loss"] == pytest.approx(expected, rel=2e-2 if policy != "float32" else 1e-4)


def test_dict_labels_and_the_task_objective():
    keras.utils.set_random_seed(2)
    x, y = _sentences(32, seed=3)
    model = AlbertClassifier(AlbertConfig(**SMALL), num_labels=2, classifier_dropout=0.0)
    # Labels keyed by output name meet that output.
    model.compile(optimizer="adam", loss={"logits": SCCE}, metrics={"logits": ["accuracy"]})
    result = model.evaluate(x, {"logits": y}, verbose=0, return_dict=True)
    assert set(result) == {"loss", "accuracy"}
    logits = model.predict(x, verbose=0)["logits"]
    assert result["loss"] == pytest.approx(float(np.mean(SCCE(y, logits))), rel=1e-4)
    # Without a loss: the task's own objective on the features' label_ids (as run_classifier).
    model.compile(optimizer="adam")
    features = dict(x, label_ids=y, is_real_example=np.r_[np.ones(24), np.zeros(8)])
    own = model.evaluate(features, verbose=0, return_dict=True)
    weighted = float(np.mean(SCCE(y[:24], logits[:24])))
    assert own["loss"] == pytest.approx(weighted, rel=1e-4)
    model.fit(tf.data.Dataset.from_tensor_slices(features).batch(8), epochs=1, verbose=0)


def test_regression_multiple_choice_and_squad():
    keras.utils.set_random_seed(3)
    config = AlbertConfig(**SMALL)
    x, _ = _sentences(16, seed=4)
    scores = np.linspace(0, 5, 16).astype(np.float32)
    reg = AlbertClassifier(config, num_labels=1, regression=True)
    reg.compile(optimizer="adam", loss="mse", metrics=["mae"])
    result = reg.evaluate(x, scores, verbose=0, return_dict=True)
    predictions = reg.predict(x, verbose=0)["predictions"]
    assert result["loss"] == pytest.approx(float(np.mean((predictions - scores) ** 2)), rel=1e-4)

    choices = {k: np.stack([v[:8], v[8:]], 1) for k, v in x.items()}  # [8, 2 choices, seq]
    answers = np.array([0, 1] * 4, np.int32)
    race = AlbertMultipleChoice(config)
    race.compile(optimizer="adam", loss=SCCE, metrics=["accuracy"])
    race.fit(choices, answers, epochs=1, verbose=0)
    assert race.predict(choices, verbose=0)["probabilities"].shape == (8, 2)

    starts, ends = np.full(16, 2, np.int32), np.full(16, 4, np.int32)
    v1 = AlbertSquad(config)
    v1.compile(optimizer="adam", loss=[SCCE, SCCE])
    loss = v1.evaluate(x, (starts, ends), verbose=0, return_dict=True)["loss"]
    out = v1(x, training=False)
    expected = float(np.mean(SCCE(starts, out["start_logits"])) +
                     np.mean(SCCE(ends, out["end_logits"])))
    assert loss == pytest.approx(expected, rel=1e-4)

    v2 = AlbertSquad(config, version_2=True)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    v2.compile(optimizer="adam", loss=[SCCE, SCCE, bce])
    impossible = np.array([0, 1] * 8, np.float32)
    pooler = _pooler(v2)
    with _missing_gradient_warnings() as missing:
        history = v2.fit(dict(x, start_positions=starts), (starts, ends, impossible), epochs=1,
                         verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # No loss reaches the pooler: left as it was, without Keras's warning about a forgotten loss.
    assert missing == [] and _pooler(v2) == pooler
    # A loss on the start only: the end and answerability heads get no gradient, and Keras says so.
    v2.compile(optimizer="adam", loss=[SCCE, None, None])
    with _missing_gradient_warnings() as missing:
        v2.fit(dict(x, start_positions=starts), (starts, ends, impossible), epochs=1, verbose=0)
    assert missing and all("end_logits_dense_0_kernel" in m and "pooler/kernel" in m
                           for m in missing), missing


def _pooler(model):
    return [v.numpy().tolist() for v in model.encoder.pooler.weights]


@contextlib.contextmanager
def _missing_gradient_warnings():
    """The messages of Keras's warnings about variables without a gradient, while inside."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        missing = []
        yield missing
    missing += [str(w.message) for w in caught if "Gradients do not exist" in str(w.message)]


def test_token_classifier_with_a_keras_loss_and_with_its_own_objective(tmp_path):
    """Per-piece labels with Keras's ignore_class for unlabelled pieces; compiled without a loss
    it trains the run_ner objective from tag_ids/tag_mask in the features; .keras round trip."""
    keras.utils.set_random_seed(6)
    config = AlbertConfig(**SMALL)
    x, _ = _sentences(16, seed=7)
    tags = (x["input_word_ids"] % 3).astype(np.int32)  # a tag each id determines
    labels = np.where(x["input_mask"] == 1, tags, -1)
    model = AlbertTokenClassifier(config, num_labels=3, classifier_dropout=0.0)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    pooler = _pooler(model)
    with _missing_gradient_warnings() as missing:
        history = model.fit(x, labels, epochs=8, batch_size=8, verbose=0).history["loss"]
    assert history[-1] < history[0] - 0.3
    assert missing == [] and _pooler(model) == pooler  # no loss reaches it, no warning
    logits = model.predict(x, verbose=0)["logits"]
    assert logits.shape == (16, 12, 3)
    real = x["input_mask"] == 1
    assert np.mean(np.argmax(logits, -1)[real] == tags[real]) > 0.8

    own = AlbertTokenClassifier(config, num_labels=3, classifier_dropout=0.0)
    own.compile(optimizer=keras.optimizers.Adam(1e-2))  # run_ner's objective
    features = dict(x, tag_ids=np.where(real, tags + 1, 0), tag_mask=x["input_mask"])
    before = own.evaluate(features, verbose=0, batch_size=8)
    own.fit(features, epochs=4, batch_size=8, verbose=0)
    assert own.evaluate(features, verbose=0, batch_size=8) < before
    path = str(tmp_path / "tagger.keras")
    own.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded(x)["logits"], own(x)["logits"], atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"], indirect=True)
def test_no_gradient_warning_for_the_pooler_under_mixed_policies_with_xla(policy):
    """The pooler, which no loss of a tagging head reaches, under the mixed policies compiled
    with XLA (float16 through Keras's LossScaleOptimizer): left as it was, no warning."""
    keras.utils.set_random_seed(8)
    x, _ = _sentences(8, seed=9)
    model = AlbertTokenClassifier(AlbertConfig(**SMALL), num_labels=3, classifier_dropout=0.0)
    model.compile(jit_compile=True)  # the run_ner objective
    pooler = _pooler(model)
    with _missing_gradient_warnings() as missing:
        model.fit(dict(x, tag_ids=x["input_word_ids"] % 3 + 1, tag_mask=x["input_mask"]),
                  epochs=1, batch_size=8, verbose=0)
    assert missing == [] and _pooler(model) == pooler


def test_pretrainer_fit_evaluate_predict():
    keras.utils.set_random_seed(4)
    config = AlbertConfig(**SMALL)
    batches = [pretraining_batch(config.vocab_size, 4, 16, 3, seed=s) for s in range(4)]
    dataset = tf.data.Dataset.from_tensor_slices(
        {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}).batch(4)
    model = AlbertPretrainer(config)
    model.compile(optimizer=create_optimizer(1e-2, 200, 2, "lamb"))  # compiled without a loss
    before = model.evaluate(dataset, verbose=0, return_dict=True)
    history = model.fit(dataset, epochs=4, verbose=0).history
    assert set(history) == {"loss", "masked_lm_accuracy", "masked_lm_loss",
                            "sentence_order_accuracy", "sentence_order_loss"}
    assert history["loss"][-1] < history["loss"][0]
    after = model.evaluate(dataset, verbose=0, return_dict=True)
    assert 0.0 <= after["masked_lm_accuracy"] <= 1.0
    assert after["masked_lm_loss"] < before["masked_lm_loss"] - 0.05
    assert model.predict(dataset, verbose=0)["mlm_logits"].shape == (16, 3, config.vocab_size)


@pytest.mark.parametrize("fmt", ["albert_tf", "tf1", "hf", "keras_hub"])
def test_keras_files_from_every_checkpoint_format(fmt, tmp_path):
    keras.utils.set_random_seed(5)
    pretrainer = AlbertPretrainer(AlbertConfig(**TINY))
    x, _ = _sentences(4, seed=6)
    pretrainer({**x, "masked_lm_positions": np.ones([4, 2], np.int32)})
    source = tmp_path / fmt
    pretrainer.save_pretrained(str(source), format=fmt)
    for cls, kwargs in ((AlbertClassifier, {"num_labels": 3}), (AlbertPretrainer, {}),
                        (AlbertEncoder, {})):
        model = cls.from_pretrained(str(source), **kwargs)
        inputs = dict(x, masked_lm_positions=np.ones([4, 2], np.int32))
        if cls is AlbertEncoder:
            inputs = x
        expected = model(inputs, training=False)
        path = tmp_path / f"{cls.__name__}-{fmt}.keras"
        model.save(str(path))
        loaded = keras.models.load_model(str(path))
        assert type(loaded) is cls
        got = loaded(inputs, training=False)
        for key in ("pooled_output", "logits", "mlm_logits", "sop_logits"):
            if key in expected:
                np.testing.assert_allclose(got[key], expected[key], atol=1e-6, err_msg=key)


# ---- text in: the preprocessing layer -------------------------------------------------------

WORDS = ("the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "big", "small")


def _texts(n, seed=0):
    """English sentences; label 1 when "good" occurs."""
    rng = np.random.default_rng(seed)
    texts, labels = [], rng.integers(0, 2, n).astype(np.int32)
    for label in labels:
        words = list(rng.choice(WORDS, rng.integers(3, 9)))
        if label:
            words.insert(int(rng.integers(0, len(words))), "good")
        texts.append(" ".join(words).capitalize() + ".")
    return np.array(texts), labels


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    from albert_tf.data.vocab import train_sentencepiece
    d = tmp_path_factory.mktemp("spm")
    texts, _ = _texts(400, seed=9)
    (d / "corpus.txt").write_text("\n".join(texts), encoding="utf-8")
    return train_sentencepiece(str(d / "corpus.txt"), str(d / "tiny"), 60,
                               hard_vocab_limit=False)


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    import zh_release
    return zh_release.write_vocab(tmp_path_factory.mktemp("wp") / "vocab_chinese.txt")


@pytest.mark.parametrize("kind", ["sentencepiece", "wordpiece"])
def test_preprocessor_gives_full_tokenizer_ids(kind, spm, wordpiece):
    import zh_release
    from albert_tf import AlbertPreprocessor, FullTokenizer
    from albert_tf.serving.predictor import pack, pad_batch
    vocabulary = spm if kind == "sentencepiece" else wordpiece
    texts = list(_texts(6)[0]) if kind == "sentencepiece" else zh_release.sentences(6)
    host = FullTokenizer(vocabulary)
    ids = host.special_ids()
    layer = AlbertPreprocessor(vocabulary, seq_length=24)
    for a, b in ((texts, None), (texts[:3], texts[3:])):
        got = layer(a if b is None else (a, b))
        rows = [pack(host.encode(x), None if y is None else host.encode(y), 24, ids["[CLS]"],
                     ids["[SEP]"]) for x, y in zip(a, b or [None] * len(a))]
        expected = pad_batch(rows)
        for key, value in expected.items():
            assert got[key].shape == (len(a), 24)
            np.testing.assert_array_equal(got[key][:, :value.shape[1]], value, err_msg=key)
            assert not np.any(got[key][:, value.shape[1]:])
    longest = AlbertPreprocessor(vocabulary, seq_length=24, pad_to_longest=True)(texts[:2])
    assert longest["input_word_ids"].shape[1] == max(
        min(len(host.encode(t)) + 2, 24) for t in texts[:2])


@pytest.mark.parametrize("policy", ["mixed_bfloat16"], indirect=True)  # float32: above
def test_classifier_fits_and_serves_on_strings(policy, spm, tmp_path):
    import sentencepiece
    from albert_tf import AlbertPreprocessor
    keras.utils.set_random_seed(7)
    vocab = sentencepiece.SentencePieceProcessor(model_file=spm).get_piece_size()
    model = AlbertClassifier(AlbertConfig(**{**SMALL, "vocab_size": vocab}), num_labels=2,
                             classifier_dropout=0.0,
                             preprocessor=AlbertPreprocessor(spm, seq_length=16,
                                                             pad_to_longest=True))
    texts, labels = _texts(64, seed=1)
    texts = tf.constant(texts)  # Keras's array adapters take no NumPy unicode arrays
    # 3e-3 left seeds 7 and 9 at 0.73 on a CPU without AVX-512 (bfloat16 emulated); 6e-3: 0.88+
    model.compile(optimizer=keras.optimizers.Adam(6e-3), loss=SCCE, metrics=["accuracy"])
    before = model.evaluate(texts, labels, verbose=0, return_dict=True)
    model.fit(tf.data.Dataset.from_tensor_slices((texts, labels)).batch(16), epochs=12,
              verbose=0)
    after = model.evaluate(texts, labels, verbose=0, return_dict=True)
    assert after["loss"] < before["loss"] - 0.1 and after["accuracy"] >= 0.75, (before, after)
    probabilities = model.predict(texts[:8], verbose=0)["probabilities"]

    path = tmp_path / "classifier.keras"
    model.save(str(path))
    loaded = keras.models.load_model(str(path))
    assert loaded.preprocessor.vocabulary != spm  # the asset, not the original file
    assert loaded.optimizer is not None  # compiled as saved: training can go on
    np.testing.assert_allclose(loaded.predict(texts[:8], verbose=0)["probabilities"],
                               probabilities, atol=1e-6)
    export = tmp_path / "serving"
    model.export(str(export), format="tf_saved_model", verbose=False,
                 input_signature=[tf.TensorSpec([None], tf.string)])
    reloaded = tf.saved_model.load(str(export))  # kept: its function needs its variables
    served = reloaded.serve(tf.constant(texts[:8]))
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-6)
