"""Dynamic masking in tf.data: the original rule's statistics, seeds, restoration. (Training with
it under every precision, with and without XLA: test_training's matrix test.)"""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import pretraining
from albert_tf.data.dynamic_masking import batch_seed, dynamic_mask, restore_original_tokens
from albert_tf.data.pipeline import pretraining_dataset
from conftest import write_pretraining_records

VOCAB = 30000


def synthetic(num, seq, seed=0, start_prob=0.7):
    """[CLS] A [SEP] B [SEP] sequences of random length with random word starts."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(seq // 2, seq + 1, num)
    sep = rng.integers(2, lengths - 2)
    pos = np.arange(seq)[None, :]
    special = (pos == 0) | (pos == sep[:, None]) | (pos == lengths[:, None] - 1)
    text = (pos < lengths[:, None]) & ~special
    ids = np.where(text, rng.integers(5, VOCAB, (num, seq)), 0).astype(np.int32)
    ids[:, 0] = 2
    ids[special & (pos > 0)] = 3
    starts = text & (rng.random((num, seq)) < start_prob)
    return ids, starts, special, lengths


def graph_masks(ids, token_boundary, input_mask, options, seed=0):
    batch = {"input_word_ids": ids, "input_mask": input_mask, "token_boundary": token_boundary}
    out = dynamic_mask(batch, batch_seed(seed, 0), options)
    return {k: np.asarray(v) for k, v in out.items()}


def summary(ids, new_ids, positions, labels, weights, special, lengths, token_boundary):
    """Counts, 80/10/10 shares and masked-run lengths (in words) of one masking."""
    w = weights > 0
    rows = np.nonzero(w)[0]
    pos, label = positions[w], labels[w]
    shown = new_ids[rows, pos]
    np.testing.assert_array_equal(label, ids[rows, pos])
    assert not special[rows, pos].any() and (pos < lengths[rows]).all()
    for r in range(len(ids)):
        p = positions[r][w[r]]
        assert (np.diff(p) > 0).all() and (positions[r][~w[r]] == 0).all()
    masked = np.zeros(ids.shape, bool)
    masked[rows, pos] = True
    np.testing.assert_array_equal(new_ids[~masked], ids[~masked])
    text = (np.arange(ids.shape[1])[None] < lengths[:, None]) & ~special
    runs = []
    for r in range(len(ids)):
        t = np.nonzero(text[r])[0]
        starts = token_boundary[r, t] == 1
        starts[0] = True
        word = np.cumsum(starts) - 1
        word_masked = np.bincount(word, weights=masked[r, t]) / np.bincount(word)
        assert np.isin(word_masked, [0.0, 1.0]).all()  # whole words
        edges = np.diff(np.concatenate([[0], word_masked.astype(int), [0]]))
        runs += list(np.nonzero(edges == -1)[0] - np.nonzero(edges == 1)[0])
    runs = np.array(runs)
    return {"count": w.sum(1), "mask": np.mean(shown == 4),
            "kept": np.mean(shown == label), "runs": [np.mean(runs == k) for k in (1, 2, 3)]}


@pytest.mark.parametrize("seq,start_prob", [(128, 0.7), (512, 1.0)])
def test_statistics_match_the_static_builder(seq, start_prob):
    num = 3000 if seq == 128 else 1000
    ids, starts, special, lengths = synthetic(num, seq, start_prob=start_prob)
    options = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=4, max_predictions_per_seq=20)
    static = pretraining.mask_batch(ids, starts, special, lengths, options,
                                    np.random.default_rng(1))
    input_mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    token_boundary = static[1]
    dyn = graph_masks(ids, token_boundary, input_mask, options)
    a = summary(ids, *static[:1], *static[2:], special, lengths, token_boundary)
    b = summary(ids, dyn["input_word_ids"], dyn["masked_lm_positions"], dyn["masked_lm_ids"],
                dyn["masked_lm_weights"], special, lengths, token_boundary)
    budget = np.minimum(20, np.maximum(1, np.rint(lengths * 0.15)))
    assert (b["count"] <= budget).all() and (b["count"] >= 1).all()
    assert np.mean(b["count"] == budget) > 0.97
    assert b["count"].mean() == pytest.approx(a["count"].mean(), rel=0.01)
    assert b["mask"] == pytest.approx(0.8, abs=0.01)
    assert b["kept"] == pytest.approx(0.1, abs=0.01)
    assert b["runs"] == pytest.approx(a["runs"], abs=0.02)
    if seq == 512:  # 20 single-piece words of ~500: runs are nearly the drawn n-grams
        assert b["runs"] == pytest.approx([6 / 11, 3 / 11, 2 / 11], abs=0.03)


def test_special_ids_are_read_off_the_records():
    """A WordPiece vocabulary ([CLS] 101, [SEP] 102, [MASK] 103, as the Chinese releases'):
    [CLS] and [SEP] are never masked, and text ids 2 and 3 are ordinary tokens."""
    ids, starts, special, lengths = synthetic(500, 64, seed=3, start_prob=1.0)
    ids = np.where(special & (ids == 2), 101, np.where(special & (ids == 3), 102, ids))
    text = ~special & (np.arange(64)[None] < lengths[:, None])
    ids[:, 1] = np.where(text[:, 1], 3, ids[:, 1])  # text tokens with the English [SEP] id
    ids[:, 2] = np.where(text[:, 2], 2, ids[:, 2])
    input_mask = (np.arange(64)[None] < lengths[:, None]).astype(np.int32)
    options = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=103, masked_lm_prob=0.5,
                                         max_predictions_per_seq=30, ngram=1)
    out = graph_masks(ids, (special | starts).astype(np.int32), input_mask, options)
    w = out["masked_lm_weights"] > 0
    rows, positions = np.nonzero(w)[0], out["masked_lm_positions"][w]
    assert not special[rows, positions].any()
    assert np.isin(out["masked_lm_ids"][w], [2, 3]).sum() > 20  # text 2/3 get masked too
    assert (out["input_word_ids"][rows, positions] == 103).mean() == pytest.approx(0.8, abs=0.04)


def test_options_cap_ngram_and_zero_prob():
    ids, starts, special, lengths = synthetic(400, 64, start_prob=1.0)
    input_mask = (np.arange(64)[None] < lengths[:, None]).astype(np.int32)
    tb = (special | starts).astype(np.int32)
    one = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=4, max_predictions_per_seq=5,
                                     masked_lm_prob=0.5, ngram=1)
    out = graph_masks(ids, tb, input_mask, one)
    assert (out["masked_lm_weights"].sum(1) == 5).all()
    longer = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=4, max_predictions_per_seq=5,
                                        ngram=3, favor_shorter_ngram=False)
    masked = graph_masks(ids, tb, input_mask, longer)["masked_lm_positions"]
    adjacent = np.mean(np.diff(masked, axis=1) == 1)
    shorter = graph_masks(ids, tb, input_mask, pretraining.MaskingOptions(
        vocab_size=VOCAB, mask_id=4, max_predictions_per_seq=5))["masked_lm_positions"]
    assert adjacent > np.mean(np.diff(shorter, axis=1) == 1) + 0.1
    zero = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=4, masked_lm_prob=0.0,
                                      max_predictions_per_seq=5)
    out = graph_masks(ids, tb, input_mask, zero)
    assert out["masked_lm_weights"].sum() == 0
    np.testing.assert_array_equal(out["input_word_ids"], ids)


def test_restores_the_builders_masks():
    ids, starts, special, lengths = synthetic(500, 64)
    options = pretraining.MaskingOptions(vocab_size=VOCAB, mask_id=4, max_predictions_per_seq=10)
    masked, _, positions, labels, weights = pretraining.mask_batch(
        ids, starts, special, lengths, options, np.random.default_rng(0))
    assert (masked != ids).sum() > 1000
    batch = {"input_word_ids": tf.constant(masked), "masked_lm_positions": positions,
             "masked_lm_ids": labels, "masked_lm_weights": weights}
    restored = restore_original_tokens(batch)["input_word_ids"].numpy()
    np.testing.assert_array_equal(restored, ids)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return write_pretraining_records(tmp_path_factory.mktemp("rec") / "train.tfrecord", 64,
                                     seq=32, preds=5)


def _dynamic(records, seed, batch=64, is_training=True):
    return pretraining_dataset(records, batch, 32, 5, is_training=is_training, seed=seed,
                               shuffle_buffer=1, dynamic_masking=True, vocab_size=60, masked_lm_prob=0.3)


def _by_record(batch):
    """{original ids: (new ids, positions)} for a batch of dynamically masked records."""
    restored = restore_original_tokens(batch)["input_word_ids"].numpy()
    return {tuple(r): (tuple(n), tuple(p)) for r, n, p in zip(
        restored, batch["input_word_ids"].numpy(), batch["masked_lm_positions"].numpy())}


def test_pipeline_new_masks_every_epoch_and_deterministic(records):
    epochs = [_by_record(b) for b in _dynamic(records, 7).take(3)]  # a batch is one epoch
    assert len(epochs[0]) == 64 and epochs[0].keys() == epochs[1].keys() == epochs[2].keys()
    for other in epochs[1:]:
        same = sum(epochs[0][k][1] == other[k][1] for k in epochs[0])
        assert same < 32, same
    again = [_by_record(b) for b in _dynamic(records, 7).take(3)]
    assert again == epochs
    other_seed = _by_record(next(iter(_dynamic(records, 8))))
    assert sum(epochs[0][k][1] == other_seed[k][1] for k in other_seed) < 32
    # Eval (no repeat): the same masks on every pass.
    first = [_by_record(b) for b in _dynamic(records, 7, 16, is_training=False)]
    assert [_by_record(b) for b in _dynamic(records, 7, 16, is_training=False)] == first
    batch = next(iter(_dynamic(records, 7)))
    assert batch["masked_lm_positions"].shape == (64, 5)
    assert batch["masked_lm_positions"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32
    count = batch["masked_lm_weights"].numpy().sum(1)
    length = batch["input_mask"].numpy().sum(1)
    np.testing.assert_array_equal(count, np.minimum(5, np.maximum(1, np.rint(length * 0.3))))


def test_pipeline_errors(tmp_path, records):
    with pytest.raises(ValueError, match="vocab_size"):
        pretraining_dataset(records, 8, 32, 5, dynamic_masking=True)
    with pytest.raises(ValueError, match=r"--ngram >= 1 \(got 0\)"):
        pretraining_dataset(records, 8, 32, 5, dynamic_masking=True, vocab_size=60, ngram=0)
    plain = tmp_path / "plain.tfrecord"
    with tf.io.TFRecordWriter(str(plain)) as w:
        for raw in tf.data.TFRecordDataset(records).take(2):
            example = tf.train.Example.FromString(raw.numpy())
            del example.features.feature["token_boundary"]
            w.write(example.SerializeToString())
    assert next(iter(pretraining_dataset(str(plain), 2, 32, 5)))["input_word_ids"].shape == (2, 32)
    with pytest.raises(ValueError, match="no 'token_boundary', which --dynamic_masking needs"):
        pretraining_dataset(str(plain), 2, 32, 5, dynamic_masking=True, vocab_size=60)
