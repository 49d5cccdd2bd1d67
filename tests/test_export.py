"""Export: the TF-Hub encoder (+ pretraining heads) and preprocessor SavedModels, every loader
(tf.saved_model/hub.load, hub.KerasLayer fine-tuning, TFSMLayer, saved_model_cli), the CLI,
the raw-string serving helper and TFLite."""

import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from albert_tf import AlbertConfig, AlbertPretrainer, FullTokenizer, export_hub
from albert_tf.data.glue import truncate_pair
from albert_tf.modeling import kernels
from albert_tf.serving import export, finetuned, lite, saved_model
from albert_tf.data.vocab import train_sentencepiece
from conftest import TINY, saved_graph
from tool_runner import run_tool, run_tool_logged

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

BIN = os.path.dirname(sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the cat sat on a mat and it cost about dollars in total when we paid Café naïve "
         "résumé Über façade jalapeño déjà vu 3.0, 12, 1999").split()
TEXTS = ["It cost 3.0, and 12, or 1", "  Café\u00a0 naïve \t RÉSUMÉ  ", "", "the cat",
         "the cat sat on a mat and it cost about dollars in total when we paid déjà vu"]


def _lines(n, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 14))) for _ in range(n)]


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    d = tmp_path_factory.mktemp("spm")
    (d / "corpus.txt").write_text("\n".join(_lines(1500, 0)), encoding="utf-8")
    return train_sentencepiece(str(d / "corpus.txt"), str(d / "tiny"), 100,
                               hard_vocab_limit=False)


@pytest.fixture(scope="module")
def tokenizer(spm):
    return FullTokenizer(spm, do_lower_case=True)


@pytest.fixture(scope="module")
def pretrainer(tokenizer):
    model = AlbertPretrainer(AlbertConfig(**dict(TINY, vocab_size=len(tokenizer))))
    rng = np.random.default_rng(0)
    for v in model.variables:  # large random weights: outputs that differ by input
        value = rng.normal(0.0, 0.3, v.shape) + (1.0 if "gamma" in v.path else 0.0)
        v.assign(value.astype(np.float32))
    return model


@pytest.fixture(scope="module")
def hub_dir(pretrainer, spm, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("export") / "albert_hub")
    assert export.export_encoder(pretrainer, path, spm, with_pretrainer_heads=True) == path
    return path


@pytest.fixture(scope="module")
def preprocessor_dir(spm, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("export") / "preprocess")
    export.export_preprocessor(path, spm, default_seq_length=16)
    return path


def _inputs(seed=0, batch=3, seq=12, vocab=60):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, batch)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    ids = np.where(mask == 1, rng.integers(5, vocab, (batch, seq)), 0).astype(np.int32)
    ids[:, 0] = 2
    types = ((np.arange(seq)[None] >= lengths[:, None] // 2) & (mask == 1)).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _pack(tokenizer, texts_a, texts_b=None, seq_length=16):
    """The original classifier features: [CLS] A [SEP] (B [SEP]), `_truncate_seq_pair`, zeros."""
    rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for i, text in enumerate(texts_a):
        a = tokenizer.encode(text)
        if texts_b is None:
            a = a[:seq_length - 2]
            ids, types = [2] + a + [3], [0] * (len(a) + 2)
        else:
            b = tokenizer.encode(texts_b[i])
            truncate_pair(a, b, seq_length - 3)
            ids, types = [2] + a + [3] + b + [3], [0] * (len(a) + 2) + [1] * (len(b) + 1)
        pad = seq_length - len(ids)
        rows["input_word_ids"].append(ids + [0] * pad)
        rows["input_mask"].append([1] * len(ids) + [0] * pad)
        rows["input_type_ids"].append(types + [0] * pad)
    return {k: np.array(v, np.int32) for k, v in rows.items()}


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=atol)


# ---- encoder ------------------------------------------------------------------------------


def test_encoder_outputs_equal_the_model(hub_dir, pretrainer):
    loaded = tf.saved_model.load(hub_dir)
    inputs = _inputs()
    expected = pretrainer.encoder(inputs, training=False)
    for training in (False, True):
        got = loaded(inputs, training=training)
        assert sorted(got) == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
        _close(got["pooled_output"], expected["pooled_output"])
        _close(got["default"], expected["pooled_output"])
        _close(got["sequence_output"], expected["sequence_output"])
        assert len(got["encoder_outputs"]) == 8  # 4 layers × inner_group_num 2
        for g, e in zip(got["encoder_outputs"], expected["encoder_outputs"]):
            _close(g, e)
    assert float(np.abs(expected["pooled_output"][0] - expected["pooled_output"][1]).max()) > 0.05


def test_encoder_attributes_and_heads(hub_dir, pretrainer, spm, tokenizer):
    loaded = tf.saved_model.load(hub_dir)
    encoder = pretrainer.encoder
    names = sorted(v.value.name for v in encoder.variables)
    # The root exposes the encoder's weights only; .mlm / .sop add their heads.
    assert sorted(v.name for v in loaded.variables) == names
    assert sorted(v.name for v in loaded.trainable_variables) == names
    assert list(loaded.regularization_losses) == []
    assert len(loaded.mlm.trainable_variables) == len(names) + 5
    assert len(loaded.sop.trainable_variables) == len(names) + 2
    assert bool(loaded.do_lower_case.numpy()) is True
    assert int(loaded.vocab_size.numpy()) == len(tokenizer)
    asset = loaded.sp_model_file.asset_path.numpy().decode()
    assert asset == os.path.join(hub_dir, "assets", "tiny.model")
    assert open(asset, "rb").read() == open(spm, "rb").read()
    assert AlbertConfig.from_json_file(
        os.path.join(hub_dir, "assets", "albert_config.json")) == encoder.config
    info = loaded.signatures["tokenization_info"]()
    assert info["vocab_file"].numpy().decode() == asset and bool(info["do_lower_case"])

    inputs = _inputs(1)
    inputs["masked_lm_positions"] = np.array([[1, 2, 0], [3, 1, 2], [2, 2, 1]], np.int32)
    expected = pretrainer(inputs, training=False)
    got = loaded.mlm(inputs, training=False)
    assert got["mlm_logits"].shape == (3, 3, len(tokenizer))
    _close(got["mlm_logits"], expected["mlm_logits"])
    _close(got["sop_logits"], expected["sop_logits"])
    _close(got["pooled_output"], expected["pooled_output"])
    plain = {k: v for k, v in inputs.items() if k != "masked_lm_positions"}
    _close(loaded.sop(plain, training=False)["sop_logits"], expected["sop_logits"])
    signature = loaded.signatures["mlm"](**{k: tf.constant(v) for k, v in inputs.items()})
    assert sorted(signature) == ["default", "mlm_logits", "pooled_output", "sequence_output",
                                 "sop_logits"]
    _close(signature["mlm_logits"], expected["mlm_logits"])


def test_hub_load_and_run_classifier_loaders(hub_dir, pretrainer):
    import tensorflow_hub as hub

    from albert_tf.formats.hub import HubEncoder
    from albert_tf.formats.tokenizers import load_tokenizer

    module = hub.load(hub_dir)
    inputs = _inputs(2)
    expected = pretrainer.encoder(inputs, training=False)["pooled_output"]
    _close(module(inputs, training=False)["pooled_output"], expected)
    # What run_classifier's --albert_hub_module_handle reads.
    tokenizer = load_tokenizer(model=hub_dir)
    assert tokenizer.spm_model_file.endswith("assets/tiny.model")
    assert tokenizer.do_lower_case is True
    layer = HubEncoder(hub_dir)
    assert layer.config == pretrainer.config
    _close(layer(inputs, training=False)["pooled_output"], expected)


def test_hub_keras_layer_fine_tunes_in_tf_keras(hub_dir, pretrainer):
    import tensorflow_hub as hub
    import tf_keras

    inputs = {k: tf_keras.Input(shape=(None,), dtype=tf.int32, name=k)
              for k in export.ENCODER_INPUTS}
    encoder = hub.KerasLayer(hub_dir, trainable=True)
    pooled = encoder(inputs)["pooled_output"]
    logits = tf_keras.layers.Dense(2)(pooled)
    model = tf_keras.Model(inputs, logits)
    assert len(encoder.trainable_weights) == len(pretrainer.encoder.trainable_variables)
    x = _inputs(3)
    _close(tf_keras.Model(inputs, pooled)(x), pretrainer.encoder(x)["pooled_output"])

    before = [w.numpy().copy() for w in encoder.trainable_weights]
    model.compile(optimizer=tf_keras.optimizers.SGD(0.5),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, np.array([0, 1, 1]), epochs=1, batch_size=3, verbose=0)
    unchanged = [w.name for b, w in zip(before, encoder.trainable_weights)
                 if np.allclose(b, w.numpy())]
    # Key biases get no gradient (softmax ignores a shift shared by all keys); the rest move.
    assert unchanged == ["key/bias:0"] * 4, unchanged


def test_hub_keras_layers_from_strings_in_tf_keras(hub_dir, preprocessor_dir, pretrainer,
                                                   tokenizer):
    """The TF-Hub pattern: text → preprocessor (or tokenize + bert_pack_inputs) → encoder."""
    import tensorflow_hub as hub
    import tf_keras

    encoder = hub.KerasLayer(hub_dir, trainable=True)
    text = tf_keras.Input(shape=(), dtype=tf.string)
    single = tf_keras.Model(text, encoder(hub.KerasLayer(preprocessor_dir)(text))["pooled_output"])
    texts_a, texts_b = TEXTS, TEXTS[::-1]
    expected = pretrainer.encoder(_pack(tokenizer, texts_a), training=False)["pooled_output"]
    _close(single(tf.constant(texts_a)), expected)

    preprocessor = hub.load(preprocessor_dir)
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    pack = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=20))
    a, b = tf_keras.Input(shape=(), dtype=tf.string), tf_keras.Input(shape=(), dtype=tf.string)
    pair = tf_keras.Model([a, b], encoder(pack([tokenize(a), tokenize(b)]))["pooled_output"])
    expected = pretrainer.encoder(_pack(tokenizer, texts_a, texts_b, 20),
                                  training=False)["pooled_output"]
    _close(pair([tf.constant(texts_a), tf.constant(texts_b)]), expected)


def test_tfsm_layer_in_keras3(hub_dir, pretrainer):
    import keras

    layer = keras.layers.TFSMLayer(hub_dir)  # the default endpoint, "serve"
    assert len(layer.trainable_weights) == len(pretrainer.encoder.trainable_variables)
    x = _inputs(4)
    got = layer(x)
    _close(keras.layers.TFSMLayer(hub_dir, call_endpoint="serving_default")(x)[
        "pooled_output"], got["pooled_output"])
    assert {"pooled_output", "sequence_output", "default", "encoder_outputs_7"} <= set(got)
    expected = pretrainer.encoder(x, training=False)
    _close(got["pooled_output"], expected["pooled_output"])
    _close(got["encoder_outputs_7"], expected["encoder_outputs"][7])


def test_saved_model_cli(hub_dir, pretrainer, tmp_path):
    cli = os.path.join(BIN, "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", hub_dir, "--all"], capture_output=True,
                           text=True, env=_env(), check=True).stdout
    for text in ("signature_def['serving_default']", "inputs['input_word_ids']",
                 "outputs['pooled_output']", "outputs['sequence_output']",
                 "outputs['encoder_outputs_0']", "outputs['default']",
                 "signature_def['mlm']", "outputs['mlm_logits']",
                 "signature_def['tokenization_info']"):
        assert text in shown, text
    x = _inputs(5, batch=2, seq=6)
    exprs = ";".join(f"{k}={v.tolist()}" for k, v in x.items())
    subprocess.run([cli, "run", "--dir", hub_dir, "--tag_set", "serve", "--signature_def",
                    "serving_default", "--input_exprs", exprs, "--outdir", str(tmp_path)],
                   capture_output=True, text=True, env=_env(), check=True)
    expected = pretrainer.encoder(x, training=False)
    _close(np.load(tmp_path / "pooled_output.npy"), expected["pooled_output"])
    _close(np.load(tmp_path / "sequence_output.npy"), expected["sequence_output"])


def test_tflite_conversion(hub_dir, pretrainer):
    flatbuffer = finetuned.convert_to_tflite(hub_dir, seq_length=10)
    interpreter = Interpreter(model_content=flatbuffer)
    runner = interpreter.get_signature_runner()
    for seed in (6, 7):
        x = _inputs(seed, batch=1, seq=10)
        got = runner(**x)
        expected = pretrainer.encoder(x, training=False)
        _close(got["pooled_output"], expected["pooled_output"], atol=1e-4)
        _close(got["sequence_output"], expected["sequence_output"], atol=1e-4)


# ---- preprocessor -------------------------------------------------------------------------


def test_preprocessor_ids_equal_full_tokenizer(preprocessor_dir, tokenizer):
    pre = tf.saved_model.load(preprocessor_dir)
    texts_a = TEXTS + _lines(40, 1)
    texts_b = list(reversed(texts_a))
    strings_a, strings_b = tf.constant(texts_a), tf.constant(texts_b)

    got = pre(strings_a)
    assert got["input_word_ids"].shape == (len(texts_a), 16)
    expected = _pack(tokenizer, texts_a)
    for k in expected:
        np.testing.assert_array_equal(got[k].numpy(), expected[k], err_msg=k)
    assert got["input_word_ids"].dtype == tf.int32
    # The same on LiteRT, one sentence at a time (preprocessor.tflite in the export).
    run = lite.interpreter(model_path=os.path.join(preprocessor_dir, "preprocessor.tflite")
                           ).get_signature_runner()
    for i, text in enumerate(texts_a):
        on_device = run(sentences=np.array([text.encode()], object))
        for k in expected:
            np.testing.assert_array_equal(on_device[k], expected[k][i:i + 1], err_msg=k)

    tokens = pre.tokenize(strings_a)
    assert isinstance(tokens, tf.RaggedTensor)
    assert tokens.to_list() == [tokenizer.encode(t) for t in texts_a]
    segments = [tokens, pre.tokenize(strings_b)]
    for seq_length in (16, 7, 32):
        packed = pre.bert_pack_inputs(segments, seq_length=seq_length)
        expected = _pack(tokenizer, texts_a, texts_b, seq_length)
        for k in expected:
            np.testing.assert_array_equal(packed[k].numpy(), expected[k],
                                          err_msg=f"{k} at {seq_length}")
    words = tokens.with_values(tf.RaggedTensor.from_row_lengths(
        tokens.values, tf.ones_like(tokens.values, tf.int64)))  # [batch, (words), (pieces)]
    np.testing.assert_array_equal(pre.bert_pack_inputs([words], 16)["input_word_ids"].numpy(),
                                  _pack(tokenizer, texts_a)["input_word_ids"])
    default = pre.bert_pack_inputs(segments)
    np.testing.assert_array_equal(default["input_type_ids"].numpy(),
                                  _pack(tokenizer, texts_a, texts_b)["input_type_ids"])
    # A length with no room for the text (once all of it dropped without a word).
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="seq_length leaves no room for text: 2 segment"):
        pre.bert_pack_inputs(segments, seq_length=4)
    np.testing.assert_array_equal(pre(strings_a, seq_length=9)["input_word_ids"].numpy(),
                                  _pack(tokenizer, texts_a, seq_length=9)["input_word_ids"])

    special = {k: int(v) for k, v in pre.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": len(tokenizer), "padding_id": 0, "start_of_sequence_id": 2,
                       "end_of_segment_id": 3, "mask_id": 4}
    serving = pre.signatures["serving_default"](sentences=strings_a)
    assert sorted(serving) == ["input_mask", "input_type_ids", "input_word_ids"]
    np.testing.assert_array_equal(serving["input_mask"].numpy(), _pack(
        tokenizer, texts_a)["input_mask"])
    assert list(pre.variables) == [] and list(pre.trainable_variables) == []


def test_round_robin_trimming_is_the_original_truncation():
    rng = np.random.default_rng(0)
    for _ in range(30):
        la, lb, budget = (int(v) for v in rng.integers(0, 12, 3))
        a, b = list(range(100, 100 + la)), list(range(200, 200 + lb))
        got = export.pack_inputs([tf.ragged.constant([a], tf.int32),
                                  tf.ragged.constant([b], tf.int32)], budget + 3, 2, 3)
        truncate_pair(a, b, budget)
        expected = [2] + a + [3] + b + [3]
        expected += [0] * (budget + 3 - len(expected))
        assert got["input_word_ids"].numpy()[0].tolist() == expected, (la, lb, budget)


# ---- serving helper, CLI ------------------------------------------------------------------


def test_text_serving_helper(pretrainer, spm, tokenizer, tmp_path):
    encoder = pretrainer.encoder

    def outputs(out):
        return {"pooled_output": out["pooled_output"],
                "label": tf.argmax(out["pooled_output"], -1, output_type=tf.int32)}
    path = finetuned.export_text_serving(
        encoder, str(tmp_path / "serving"), spm, seq_length=12, output_fn=outputs,
        signatures={"serving_default": ("text_a",), "pair": ("text_a", "text_b")})
    loaded = tf.saved_model.load(path)
    texts_a, texts_b = TEXTS, TEXTS[::-1]
    single = loaded.signatures["serving_default"](text_a=tf.constant(texts_a))
    expected = encoder(_pack(tokenizer, texts_a, seq_length=12), training=False)
    _close(single["pooled_output"], expected["pooled_output"])
    assert single["label"].numpy().tolist() == np.argmax(expected["pooled_output"], -1).tolist()
    pair = loaded.signatures["pair"](text_a=tf.constant(texts_a), text_b=tf.constant(texts_b))
    expected = encoder(_pack(tokenizer, texts_a, texts_b, seq_length=12), training=False)
    _close(pair["pooled_output"], expected["pooled_output"])
    by_attribute = loaded.pair({"text_a": tf.constant(texts_a), "text_b": tf.constant(texts_b)})
    _close(by_attribute["pooled_output"], expected["pooled_output"])
    assert len(loaded.trainable_variables) == len(encoder.trainable_variables)


def test_export_cli_from_tf1_and_hf_checkpoints(pretrainer, spm, tmp_path):
    tf1 = pretrainer.save_pretrained(str(tmp_path / "tf1"), format="tf1", spm_model_file=spm)
    hf = pretrainer.save_pretrained(str(tmp_path / "hf"), format="hf", spm_model_file=spm)
    for args in (["--export_type=encoder", f"--init_checkpoint={tf1}",
                  f"--export_path={tmp_path / 'from_tf1'}"],
                 ["--export_type=pretrainer", f"--albert_directory={hf}",
                  f"--export_path={tmp_path / 'from_hf'}", "--do_lower_case=false"]):
        status, log = run_tool_logged("export_hub", *args)  # as `python -m` runs it
        assert status == 0, log[-3000:]

    x = _inputs(8)
    x["masked_lm_positions"] = np.array([[1, 2], [2, 1], [1, 1]], np.int32)
    expected = pretrainer(x, training=False)
    plain = {k: x[k] for k in export.ENCODER_INPUTS}
    from_tf1 = tf.saved_model.load(str(tmp_path / "from_tf1"))
    _close(from_tf1(plain, training=False)["pooled_output"], expected["pooled_output"])
    assert not hasattr(from_tf1, "mlm") and bool(from_tf1.do_lower_case.numpy())
    from_hf = tf.saved_model.load(str(tmp_path / "from_hf"))
    _close(from_hf.mlm(x, training=False)["mlm_logits"], expected["mlm_logits"])
    assert not bool(from_hf.do_lower_case.numpy())


def test_export_cli_errors(pretrainer, spm, tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        export.export_from_checkpoint("encoder", str(tmp_path / "out"),
                                      str(tmp_path / "missing"), spm_model_file=spm)
    ckpt = pretrainer.save_pretrained(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError,
                       match=r"no vocabulary: pass --spm_model_file or --vocab_file \(there is "
                             r"no \*\.model or vocab\*\.txt beside the checkpoint in "):
        export.export_from_checkpoint("encoder", str(tmp_path / "out"), ckpt)
    with pytest.raises(FileNotFoundError, match="--spm_model_file=.*nope.model does not exist"):
        export.export_from_checkpoint("preprocessor", str(tmp_path / "out"),
                                      spm_model_file=str(tmp_path / "nope.model"))
    with pytest.raises(ValueError, match="needs --init_checkpoint"):
        export.export_from_checkpoint("pretrainer", str(tmp_path / "out"), spm_model_file=spm)
    status, last, _ = run_tool(export_hub, capsys, "--export_type=encoder",
                               f"--init_checkpoint={tmp_path / 'missing'}",
                               f"--spm_model_file={spm}", f"--export_path={tmp_path / 'out'}")
    assert status != 0 and "checkpoint not found" in last  # run_tool: and no traceback
    assert not os.path.exists(tmp_path / "out")


def test_save_replaces_an_earlier_export_and_nothing_else(tmp_path):
    from albert_tf.outputs import OutputRefused
    target = tmp_path / "model"
    (target / "variables").mkdir(parents=True)
    (target / "variables" / "variables.index").write_bytes(b"old")
    (target / "saved_model.pb").write_bytes(b"old")
    module = tf.Module()
    module.v = tf.Variable(3.0)
    saved_model.save_atomically(module, str(target), signatures=None)
    assert sorted(os.listdir(tmp_path)) == ["model"]
    assert (target / "saved_model.pb").read_bytes() != b"old"
    assert float(tf.saved_model.load(str(target)).v.numpy()) == 3.0
    (target / "notes.txt").write_text("mine")  # no longer only an export
    with pytest.raises(OutputRefused, match="already holds files that are not a SavedModel "
                                            "export"):
        saved_model.save_atomically(module, str(target), signatures=None)
    assert (target / "notes.txt").read_text() == "mine"


def test_encoder_export_is_traced_without_the_fused_kernels(hub_dir, tmp_path):
    # training=True is traced too; the export keeps the plain ops (no XLA functions inside).
    assert saved_graph(hub_dir)[1] == []
    module = tf.Module()
    module.f = tf.function(lambda x: kernels.masked_softmax(x, tf.zeros([3]), 1.0),
                           input_signature=[tf.TensorSpec([2, 3])])
    tf.saved_model.save(module, str(tmp_path / "xla"))
    assert saved_graph(str(tmp_path / "xla"))[1]  # the check can fail
