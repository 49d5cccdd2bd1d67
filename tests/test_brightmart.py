"""brightmart/albert_zh checkpoints in their own layout: read from their files (albert_config_*.json
with ln_type, albert_model.ckpt under BERT-style names), checked against a NumPy transcription of
their modeling.py (embedding_lookup_factorized, embedding_postprocessor, transformer_model and
prelln_transformer_model, the pooler) and run_pretraining.py's get_masked_lm_output."""

import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.formats.checkpoints import write_tf1_checkpoint
from albert_tf.modeling.pretrainer import AlbertPretrainer

E, H, HEADS, FFN, LAYERS, VOCAB, POSITIONS = 8, 16, 2, 32, 3, 40, 24


def _config(ln_type):
    """A tiny config as brightmart writes them (their pooler vestiges, ln_type, no group keys)."""
    return {"attention_probs_dropout_prob": 0.0, "directionality": "bidi", "hidden_act": "gelu",
            "hidden_dropout_prob": 0.0, "hidden_size": H, "embedding_size": E,
            "initializer_range": 0.02, "intermediate_size": FFN,
            "max_position_embeddings": POSITIONS, "num_attention_heads": HEADS,
            "num_hidden_layers": LAYERS, "pooler_fc_size": 768, "pooler_num_attention_heads": 12,
            "pooler_num_fc_layers": 3, "pooler_size_per_head": 128,
            "pooler_type": "first_token_transform", "type_vocab_size": 2, "vocab_size": VOCAB,
            "ln_type": ln_type}


def _weights(rng):
    """Every variable of their pretraining graph, by name, with its shape."""
    shapes = {"bert/embeddings/word_embeddings": (VOCAB, E),
              "bert/embeddings/word_embeddings_2": (E, H),
              "bert/embeddings/token_type_embeddings": (2, H),
              "bert/embeddings/position_embeddings": (POSITIONS, H),
              "bert/pooler/dense/kernel": (H, H), "bert/pooler/dense/bias": (H,),
              "cls/predictions/transform/dense/kernel": (H, H),
              "cls/predictions/transform/dense/bias": (H,),
              "cls/predictions/output_bias": (VOCAB,),
              "cls/seq_relationship/output_weights": (2, H),
              "cls/seq_relationship/output_bias": (2,)}
    block = "bert/encoder/layer_shared"
    for name, (n_in, n_out) in {"attention/self/query": (H, H), "attention/self/key": (H, H),
                                "attention/self/value": (H, H),
                                "attention/output/dense": (H, H), "intermediate/dense": (H, FFN),
                                "output/dense": (FFN, H)}.items():
        shapes[f"{block}/{name}/kernel"] = (n_in, n_out)
        shapes[f"{block}/{name}/bias"] = (n_out,)
    for scope in ("bert/embeddings", f"{block}/attention/output", f"{block}/output",
                  "cls/predictions/transform"):
        shapes[f"{scope}/LayerNorm/gamma"] = (H,)
        shapes[f"{scope}/LayerNorm/beta"] = (H,)
    out = {}
    for name, shape in shapes.items():
        scale = 0.3 if not name.endswith("gamma") else 0.1
        out[name] = (rng.normal(0, scale, shape) + (1.0 if name.endswith("gamma") else 0.0)
                     ).astype(np.float32)
    return out


# ---- their modeling.py, in NumPy ------------------------------------------------------------------

def _gelu(x):  # modeling.gelu: the tanh approximation
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _layer_norm(x, w, scope):  # tf.contrib.layers.layer_norm over the last axis, epsilon 1e-12
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[f"{scope}/LayerNorm/gamma"] + \
        w[f"{scope}/LayerNorm/beta"]


def _dense(x, w, scope, activation=None):
    y = x @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]
    return activation(y) if activation else y


def _attention(x_from, mask, w, scope):
    """attention_layer: [batch, seq, H] → [batch, seq, H], additive mask -10000."""
    batch, seq, _ = x_from.shape
    heads = lambda t: t.reshape(batch, seq, HEADS, H // HEADS).transpose(0, 2, 1, 3)  # noqa
    q = heads(_dense(x_from, w, f"{scope}/query"))
    k = heads(_dense(x_from, w, f"{scope}/key"))
    v = heads(_dense(x_from, w, f"{scope}/value"))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(H // HEADS)
    scores += (1.0 - mask[:, None, None, :]) * -10000.0
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, H)


def reference(w, ids, mask, types, ln_type):
    """(sequence_output, pooled_output) of their BertModel."""
    x = w["bert/embeddings/word_embeddings"][ids] @ w["bert/embeddings/word_embeddings_2"]
    x = x + w["bert/embeddings/token_type_embeddings"][types]
    x = x + w["bert/embeddings/position_embeddings"][None, :ids.shape[1]]
    x = _layer_norm(x, w, "bert/embeddings")
    block = "bert/encoder/layer_shared"
    for _ in range(LAYERS):
        if ln_type == "postln":  # transformer_model
            attention = _dense(_attention(x, mask, w, f"{block}/attention/self"), w,
                               f"{block}/attention/output/dense")
            attention = _layer_norm(attention + x, w, f"{block}/attention/output")
            ffn = _dense(_dense(attention, w, f"{block}/intermediate/dense", _gelu), w,
                         f"{block}/output/dense")
            x = _layer_norm(ffn + attention, w, f"{block}/output")
        else:  # prelln_transformer_model
            normed = _layer_norm(x, w, f"{block}/attention/output")
            attention = _dense(_attention(normed, mask, w, f"{block}/attention/self"), w,
                               f"{block}/attention/output/dense") + x
            ffn_in = _layer_norm(attention, w, f"{block}/output")
            x = _dense(_dense(ffn_in, w, f"{block}/intermediate/dense", _gelu), w,
                       f"{block}/output/dense") + attention
    pooled = _dense(x[:, 0], w, "bert/pooler/dense", np.tanh)
    return x, pooled


def reference_mlm(w, sequence_output, positions):
    """run_pretraining.get_masked_lm_output's logits: dense H→H, LayerNorm, back through
    word_embeddings_2 to E, the word table, the bias."""
    x = np.take_along_axis(sequence_output, positions[..., None], 1)
    x = _layer_norm(_dense(x, w, "cls/predictions/transform/dense", _gelu), w,
                    "cls/predictions/transform")
    x = x @ w["bert/embeddings/word_embeddings_2"].T
    return x @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]


@pytest.fixture(params=["postln", "preln"])
def release(request, tmp_path):
    """A release directory as theirs unpack: albert_config_tiny.json, albert_model.ckpt.*."""
    rng = np.random.default_rng(0 if request.param == "postln" else 1)
    weights = _weights(rng)
    (tmp_path / "albert_config_tiny.json").write_text(json.dumps(_config(request.param)))
    write_tf1_checkpoint(weights, str(tmp_path / "albert_model.ckpt"))
    return request.param, tmp_path, weights


def _inputs(rng, batch=3, seq=11):
    ids = rng.integers(0, VOCAB, (batch, seq)).astype(np.int32)
    mask = np.ones((batch, seq), np.int32)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    types = np.zeros((batch, seq), np.int32)
    types[:, 5:] = 1
    return ids, mask, types


def test_their_config_names_their_layout():
    config = AlbertConfig.from_dict(_config("preln"))
    assert (config.embedding_layout, config.ln_type) == ("brightmart", "preln")
    assert AlbertConfig.from_dict(config.to_dict()) == config  # our file keeps the layout
    google = AlbertConfig.from_dict({k: v for k, v in _config("postln").items() if k != "ln_type"})
    assert (google.embedding_layout, google.ln_type) == ("google", "postln")
    with pytest.raises(ValueError, match="Hugging Face ALBERT has the original ALBERT layout "
                                         "only; this model has embedding_layout=brightmart"):
        config.to_hf_dict()


def test_the_encoder_matches_their_modeling_to_1e5(release):
    ln_type, directory, weights = release
    encoder = AlbertEncoder.from_pretrained(str(directory))
    assert (encoder.config.embedding_layout, encoder.config.ln_type) == ("brightmart", ln_type)
    ids, mask, types = _inputs(np.random.default_rng(2))
    ours = encoder({"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                    "input_type_ids": tf.constant(types)}, training=False)
    sequence, pooled = reference(weights.copy(), ids, mask.astype(np.float32), types, ln_type)
    real = mask.astype(bool)
    np.testing.assert_allclose(ours["sequence_output"].numpy()[real], sequence[real], atol=1e-5)
    np.testing.assert_allclose(ours["pooled_output"].numpy(), pooled, atol=1e-5)
    # Every variable of theirs was read, and is written back under its name.
    names = set(encoder.tf1_weights())
    assert names == {n for n in weights if n.startswith("bert/")}


def test_their_mlm_head_for_continued_pretraining(release):
    ln_type, directory, weights = release
    model = AlbertPretrainer.from_pretrained(str(directory))
    ids, mask, types = _inputs(np.random.default_rng(3))
    positions = np.array([[1, 3], [2, 6], [0, 3]], np.int32)
    out = model({"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
                 "input_type_ids": tf.constant(types),
                 "masked_lm_positions": tf.constant(positions)}, training=False)
    sequence, _ = reference(weights.copy(), ids, mask.astype(np.float32), types, ln_type)
    np.testing.assert_allclose(out["mlm_logits"].numpy(),
                               reference_mlm(weights, sequence, positions), atol=1e-4)
    assert set(model.tf1_weights()) == set(weights)


@pytest.mark.parametrize("policy,jit", [("mixed_bfloat16", True), ("mixed_float16", False)])
def test_a_training_step_under_reduced_precision(release, policy, jit):
    """The pre-LN block and the projected embeddings train under the mixed policies (bfloat16
    with the step in XLA, as on a TPU): finite gradients for every variable, logits near
    float32's."""
    import keras
    ln_type, directory, weights = release
    ids, mask, types = _inputs(np.random.default_rng(4))
    inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
              "input_type_ids": tf.constant(types),
              "masked_lm_positions": tf.constant([[1, 3], [2, 6], [0, 3]], tf.int32)}
    reference_logits = AlbertPretrainer.from_pretrained(str(directory))(
        inputs, training=False)["mlm_logits"].numpy()
    keras.mixed_precision.set_global_policy(policy)
    model = AlbertPretrainer.from_pretrained(str(directory))

    @tf.function(jit_compile=jit)
    def step():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.constant([[5, 6], [7, 8], [9, 10]]), out["mlm_logits"]))
            loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.constant([0, 1, 0]), out["sop_logits"]))
        return out["mlm_logits"], tape.gradient(loss, model.trainable_variables)
    logits, grads = step()
    assert len(grads) == len(weights)
    assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads)
    np.testing.assert_allclose(logits.numpy(), reference_logits, atol=0.15)


@pytest.mark.slow
def test_fine_tunes_exports_and_converts_like_any_other(tmp_path):
    """A brightmart-layout release with its vocab.txt: run_classifier on a CSV, the serving
    export, a TF1 round trip under their names; the Hugging Face conversion refused in one
    line."""
    import csv
    import random

    from albert_tf import run_classifier
    from albert_tf.conversion import convert
    from albert_tf.serving.classify import Classifier
    from conftest import run_main
    from zh_release import sentences, vocab_tokens, write_vocab

    release = tmp_path / "albert_tiny_zh"
    release.mkdir()
    write_vocab(release / "vocab.txt")
    config = dict(_config("preln"), vocab_size=len(vocab_tokens()), max_position_embeddings=64)
    (release / "albert_config_tiny.json").write_text(json.dumps(config))
    tf.keras.utils.set_random_seed(0)
    AlbertPretrainer(AlbertConfig.from_dict(config)).save_pretrained(str(release), format="tf1")
    (release / "albert_config.json").unlink()  # only theirs, as in their archives
    (release / "checkpoint").unlink()
    for old in release.glob("model.ckpt-best*"):
        old.rename(release / old.name.replace("model.ckpt-best", "albert_model.ckpt"))
    rng = random.Random(0)
    for split, n in (("train", 200), ("dev", 64)):
        with open(tmp_path / f"{split}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            for text in sentences(n, seed=len(split)):
                good = rng.random() < 0.5
                writer.writerow([("好" if good else "") + text, "好评" if good else "差评"])
    out = tmp_path / "out"
    best = run_main(run_classifier, dict(strategy="one_device", mixed_precision="none"), dict(
        train_file=tmp_path / "train.csv", validation_file=tmp_path / "dev.csv",
        init_checkpoint=release, output_dir=out, do_train=True, do_eval=True, train_step=150,
        warmup_step=15, save_checkpoints_steps=75, learning_rate=3e-3, train_batch_size=16,
        max_seq_length=48, export_dir=out / "export", export_tflite="none"))
    assert best["eval_accuracy"] > 0.8, best
    texts = ["好" + sentences(1, seed=9)[0], sentences(1, seed=9)[0]]
    assert [r["label"] for r in Classifier(str(out / "export"))(texts)] == [
        r["label"] for r in Classifier(str(out))(texts)]
    # TF1 under their names and back: the same model.
    convert(str(release), str(tmp_path / "tf1"), "tf1")
    names = {n for n, _ in tf.train.list_variables(str(tmp_path / "tf1" / "model.ckpt-best"))}
    assert "bert/embeddings/word_embeddings_2" in names
    assert "bert/encoder/layer_shared/attention/output/LayerNorm/gamma" in names
    with pytest.raises(ValueError, match="a Hugging Face ALBERT has the original ALBERT layout "
                                         "only"):
        convert(str(release), str(tmp_path / "hf"), "hf")
    assert not (tmp_path / "hf").exists()
