import numpy as np

from albert_tf import AlbertPretrainer
from albert_tf.modeling.pretrainer import pretraining_loss_sums


def _features(n=32, seq=12, preds=3, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 60, (n, seq)).astype(np.int32)
    positions = np.tile(np.arange(1, preds + 1, dtype=np.int32), (n, 1))
    weights = np.ones((n, preds), np.float32)
    weights[::2, -1] = 0.0  # padded prediction slots must not count
    return {"input_word_ids": ids, "input_mask": np.ones_like(ids),
            "input_type_ids": np.zeros_like(ids), "masked_lm_positions": positions,
            "masked_lm_ids": np.take_along_axis(ids, positions, 1),
            "masked_lm_weights": weights,
            "next_sentence_labels": (ids[:, :1] > 30).astype(np.int32)}


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_loss_is_the_originals(tiny_config):
    model = AlbertPretrainer(tiny_config, sop_weight=0.5)
    features = _features(n=6)
    out = model(features)
    nll = -np.take_along_axis(_log_softmax(out["mlm_logits"].numpy()),
                              features["masked_lm_ids"][..., None], -1)[..., 0]
    w = features["masked_lm_weights"]
    mlm = (nll * w).sum() / (w.sum() + 1e-5)
    sop = -np.take_along_axis(_log_softmax(out["sop_logits"].numpy()),
                              features["next_sentence_labels"], -1).mean()
    loss = model.compute_loss(features, y_pred=out)
    np.testing.assert_allclose(loss, mlm + 0.5 * sop, rtol=1e-5)
    sums = pretraining_loss_sums(features, out)
    assert float(sums["mlm_weight_sum"]) == w.sum() == 15.0
    assert float(sums["sop_count"]) == 6.0


def test_sop_weight_zero_is_mlm_only(tiny_config):
    model = AlbertPretrainer(tiny_config, sop_weight=0.0)
    features = _features(n=4)
    out = model(features)
    sums = pretraining_loss_sums(features, out)
    expected = sums["mlm_loss_sum"] / (sums["mlm_weight_sum"] + 1e-5)
    np.testing.assert_allclose(model.compute_loss(features, y_pred=out), expected, rtol=1e-6)
    assert AlbertPretrainer.from_config(model.get_config()).sop_weight == 0.0
