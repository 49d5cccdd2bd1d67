import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer


def _count(weights):
    return sum(int(np.prod(w.shape)) for w in weights)


@pytest.mark.parametrize("size,encoder_params,head_params", [
    ("base", 11_683_584, 130_226), ("large", 17_683_968, 163_506),
    ("xlarge", 58_724_864, 296_626), ("xxlarge", 222_595_584, 562_866)])
def test_parameter_counts_equal_the_original(size, encoder_params, head_params):
    config = AlbertConfig.from_json_file(f"configs/albert_{size}_v2.json")
    model = AlbertPretrainer(config)
    assert _count(model.encoder.weights) == encoder_params
    assert _count(model.weights) == encoder_params + head_params
    # Every variable appears once: the word embeddings are shared with the MLM head, not copied.
    assert len(model.weights) == len({id(w) for w in model.weights}) == len(model.tf1_weights())


def test_encoder_outputs(tiny_config, batch):
    model = AlbertEncoder(tiny_config)
    out = model(batch)
    assert out["sequence_output"].shape == (2, 10, 16)
    assert out["pooled_output"].shape == (2, 16)
    # One output per block call: layers × inner_group_num, the original's all_encoder_layers.
    assert len(out["encoder_outputs"]) == 4 * 2
    np.testing.assert_array_equal(out["encoder_outputs"][-1], out["sequence_output"])
    np.testing.assert_allclose(
        out["pooled_output"], np.tanh(out["sequence_output"][:, 0] @ model.pooler.kernel.numpy()
                                      + model.pooler.bias.numpy()), atol=1e-6)


def test_pretrainer_outputs(tiny_config, batch):
    out = AlbertPretrainer(tiny_config)(batch)
    assert out["mlm_logits"].shape == (2, 3, 60) and out["mlm_logits"].dtype == tf.float32
    assert out["sop_logits"].shape == (2, 2)


def test_layers_share_weights_across_depth():
    kw = dict(vocab_size=30, embedding_size=8, hidden_size=16, num_attention_heads=2,
              intermediate_size=24)
    shallow = AlbertEncoder(AlbertConfig(num_hidden_layers=1, **kw))
    deep = AlbertEncoder(AlbertConfig(num_hidden_layers=6, **kw))
    assert _count(shallow.weights) == _count(deep.weights)
    deep.set_weights(shallow.get_weights())
    ids = {"input_word_ids": np.array([[2, 7, 8, 3]], np.int32)}
    out = deep(ids)
    # Layer 0 of the deep model is the shallow model's only layer; later layers reapply it.
    np.testing.assert_allclose(out["encoder_outputs"][0], shallow(ids)["sequence_output"],
                               atol=1e-6)
    assert not np.allclose(out["encoder_outputs"][1], out["encoder_outputs"][0], atol=1e-3)


def test_group_routing(tiny_config, batch):
    model = AlbertEncoder(tiny_config)
    before = model(batch)["encoder_outputs"]
    for w in [w for n, w in model.tf1_weights().items() if "/group_1/" in n]:
        w.assign(w.numpy() * 1.5 + 0.1)
    after = model(batch)["encoder_outputs"]
    # 4 layers over 2 groups: layers 0-1 use group 0 (outputs 0..3), layers 2-3 group 1.
    for k in range(4):
        np.testing.assert_array_equal(before[k], after[k])
    for k in range(4, 8):
        assert not np.allclose(before[k], after[k])


def test_padding_does_not_change_real_positions(tiny_config):
    model = AlbertEncoder(tiny_config)
    ids = np.array([[2, 5, 6, 7, 3]], np.int32)
    short = model({"input_word_ids": ids, "input_mask": np.ones_like(ids)})
    padded_ids = np.pad(ids, [[0, 0], [0, 4]])
    padded = model({"input_word_ids": padded_ids, "input_mask": (padded_ids != 0).astype(np.int32)})
    np.testing.assert_allclose(padded["sequence_output"][:, :5], short["sequence_output"],
                               atol=1e-5)


def test_defaults_for_mask_and_type_ids(tiny_config):
    model = AlbertEncoder(tiny_config)
    ids = np.array([[2, 5, 6, 3]], np.int32)
    full = model({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                  "input_type_ids": np.zeros_like(ids)})
    np.testing.assert_array_equal(model({"input_word_ids": ids})["sequence_output"],
                                  full["sequence_output"])
    with pytest.raises(ValueError, match="input_word_ids"):
        model({"ids": ids})


def test_sequence_longer_than_positions_is_an_error(tiny_config):
    model = AlbertEncoder(tiny_config)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings=32"):
        model({"input_word_ids": np.ones([1, 33], np.int32)})


def test_dropout_only_in_training():
    config = AlbertConfig(vocab_size=30, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=24, hidden_dropout_prob=0.3,
                          attention_probs_dropout_prob=0.3)
    model = AlbertEncoder(config)
    ids = {"input_word_ids": np.array([[2, 7, 8, 9, 3]], np.int32)}
    a, b = model(ids, training=False), model(ids, training=False)
    np.testing.assert_array_equal(a["sequence_output"], b["sequence_output"])
    c = model(ids, training=True)
    assert not np.allclose(a["sequence_output"], c["sequence_output"])


def test_config_round_trip(tiny_config, batch):
    model = AlbertPretrainer(tiny_config)
    clone = AlbertPretrainer.from_config(model.get_config())
    assert clone.config == tiny_config
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone(batch)["mlm_logits"], model(batch)["mlm_logits"])


def test_runs_in_a_graph_with_dynamic_shapes(tiny_config, batch):
    model = AlbertPretrainer(tiny_config)
    spec = {k: tf.TensorSpec([None, None], tf.int32) for k in batch}
    fn = tf.function(lambda x: model(x)["mlm_logits"], input_signature=[spec])
    np.testing.assert_allclose(fn(batch), model(batch)["mlm_logits"], atol=1e-6)
    short = {k: v[:, :7] if k != "masked_lm_positions" else v for k, v in batch.items()}
    assert fn(short).shape == (2, 3, 60)


@pytest.mark.parametrize("policy,dtype", [("mixed_bfloat16", tf.bfloat16),
                                          ("mixed_float16", tf.float16)])
def test_mixed_precision(tiny_config, batch, policy, dtype):
    reference = AlbertPretrainer(tiny_config)
    expected = reference(batch)
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = AlbertPretrainer(tiny_config)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    model.set_weights(reference.get_weights())
    assert all(w.dtype == "float32" for w in model.weights)
    out = model(batch)
    assert out["sequence_output"].dtype == dtype
    assert out["mlm_logits"].dtype == tf.float32 and out["sop_logits"].dtype == tf.float32
    for key in ("sequence_output", "mlm_logits", "sop_logits"):
        got = tf.cast(out[key], tf.float32).numpy()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, expected[key], atol=0.1, rtol=0.05)


def test_encoder_output_positions_compute_only_those_rows(tiny_config, batch):
    model = AlbertEncoder(tiny_config)
    full = model(batch)
    part = model(batch, output_positions=batch["masked_lm_positions"])
    assert sorted(part) == ["pooled_output", "sequence_output"]
    assert part["sequence_output"].shape == (2, 3, 16)
    expected = np.take_along_axis(full["sequence_output"].numpy(),
                                  batch["masked_lm_positions"][:, :, None], axis=1)
    np.testing.assert_allclose(part["sequence_output"], expected, atol=1e-5)
    np.testing.assert_allclose(part["pooled_output"], full["pooled_output"], atol=1e-5)
