"""AlbertClassifier head and loss protocol, fine-tuning input pipeline, step arithmetic, metrics."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.data.features import make_dataset, real_outputs
from albert_tf.tasks.driver import train_and_warmup_steps
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks.classification_metrics import f1_score, matthews_corrcoef, pearson, spearman
from conftest import SMALL, TINY


def _batch(n=6, seq=10, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 60, (n, seq)).astype(np.int32)
    mask = (np.arange(seq)[None] < rng.integers(3, seq + 1, (n, 1))).astype(np.int32)
    return {"input_word_ids": ids * mask, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids), "label_ids": rng.integers(0, 3, n),
            "is_real_example": np.ones(n, np.float32), "example_index": np.arange(n)}


def test_head_names_shapes_and_checkpoint_round_trip(tmp_path):
    tf.keras.utils.set_random_seed(1)
    encoder = AlbertEncoder(AlbertConfig(**TINY))
    encoder.save_pretrained(str(tmp_path / "enc"))
    model = AlbertClassifier.from_pretrained(str(tmp_path / "enc"), num_labels=3)
    weights = model.tf1_weights()
    assert weights["output_weights"].shape == (3, TINY["hidden_size"])
    assert weights["output_bias"].shape == (3,)
    np.testing.assert_array_equal(weights["bert/pooler/dense/kernel"].numpy(),
                                  encoder.pooler.kernel.numpy())
    model.output_bias.assign([0.5, -1.0, 2.0])
    model.save_pretrained(str(tmp_path / "tf1"), format="tf1")
    names = dict(tf.train.list_variables(str(tmp_path / "tf1" / "model.ckpt-best")))
    assert names["output_weights"] == [3, TINY["hidden_size"]] and names["output_bias"] == [3]
    again = AlbertClassifier.from_pretrained(str(tmp_path / "tf1"), num_labels=3)
    np.testing.assert_array_equal(again.output_bias.numpy(), [0.5, -1.0, 2.0])
    batch = _batch()
    out = again(batch, training=False)
    np.testing.assert_allclose(out["probabilities"].numpy(),
                               model(batch, training=False)["probabilities"].numpy(), atol=1e-6)
    np.testing.assert_allclose(out["probabilities"].numpy().sum(-1), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="output_weights: checkpoint \\(3, 16\\) vs model "
                                         "\\(2, 16\\)"):
        AlbertClassifier.from_pretrained(str(tmp_path / "tf1"), num_labels=2)


def test_loss_sums_split_into_the_global_mean():
    tf.keras.utils.set_random_seed(2)
    model = AlbertClassifier(AlbertConfig(**TINY), 3, classifier_dropout=0.0)
    batch = _batch(6)
    batch["is_real_example"][5] = 0.0  # a filler example counts for nothing
    full = model.loss_sums(batch, model(batch))
    per_example = model.per_example_loss(batch, model(batch)).numpy()
    assert float(full["example_count"]) == 5
    expected = per_example[:5].mean()
    assert float(model.replica_loss(full, model.denominators(batch))) == pytest.approx(
        expected, rel=1e-5)
    halves = [{k: v[s] for k, v in batch.items()} for s in (slice(0, 3), slice(3, 6))]
    denominators = {"example_count": sum(model.denominators(h)["example_count"] for h in halves)}
    total = sum(float(model.replica_loss(model.loss_sums(h, model(h)), denominators))
                for h in halves)
    assert total == pytest.approx(expected, rel=1e-5)
    metrics = model.metrics_from_sums({k: float(v) for k, v in full.items()})
    assert metrics["loss"] == pytest.approx(expected, rel=1e-5)
    logits = model(batch)["logits"].numpy()
    hits = (logits.argmax(-1) == batch["label_ids"])[:5]
    assert metrics["accuracy"] == pytest.approx(hits.mean())


def test_regression_head():
    model = AlbertClassifier(AlbertConfig(**TINY), 1, regression=True)
    batch = _batch(4)
    batch["label_ids"] = np.array([0.0, 1.5, 3.0, 5.0], np.float32)
    out = model(batch)
    assert out["predictions"].shape == (4,) and "probabilities" not in out
    loss = model.per_example_loss(batch, out).numpy()
    np.testing.assert_allclose(loss, (out["predictions"].numpy() - batch["label_ids"]) ** 2,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="regression needs num_labels=1"):
        AlbertClassifier(AlbertConfig(**TINY), 2, regression=True)


def _features(lengths, seed=0):
    rng = np.random.default_rng(seed)
    total = int(sum(lengths))
    return {"input_word_ids": rng.integers(5, 60, total).astype(np.int32),
            "input_type_ids": np.zeros(total, np.int8),
            "lengths": np.asarray(lengths, np.int32),
            "label_ids": np.arange(len(lengths), dtype=np.int32) % 2,
            "guids": np.asarray([str(i) for i in range(len(lengths))])}


def test_eval_dataset_keeps_every_example_and_pads_each_batch():
    lengths = [5, 40, 7, 3, 18, 9, 2, 33, 12, 6, 21]
    features = _features(lengths)
    batches = list(make_dataset(features, 4, 64, is_training=False))
    assert [b["input_word_ids"].shape[1] for b in batches] == [48, 48, 32]
    assert all(b["input_word_ids"].shape[0] == 4 for b in batches)
    index = np.concatenate([b["example_index"].numpy() for b in batches])
    weight = np.concatenate([b["is_real_example"].numpy() for b in batches])
    assert index.tolist() == list(range(11)) + [-1] and weight.tolist() == [1.0] * 11 + [0.0]
    first = batches[0]
    assert first["input_mask"].numpy().sum(1).tolist() == lengths[:4]
    offsets = np.cumsum([0] + lengths)
    np.testing.assert_array_equal(first["input_word_ids"].numpy()[1, :40],
                                  features["input_word_ids"][offsets[1]:offsets[2]])
    assert not first["input_word_ids"].numpy()[1, 40:].any()
    short = list(make_dataset(_features([3, 5, 20, 9]), 2, 64, is_training=False))
    assert [b["input_word_ids"].shape[1] for b in short] == [16, 32]
    fixed = make_dataset(features, 4, 64, is_training=False, padding="max_length")
    assert {b["input_word_ids"].shape[1] for b in fixed} == {64}
    # As a TPU needs: every batch of one static shape, training and eval alike.
    for dataset in (fixed, make_dataset(features, 4, 64, is_training=True,
                                        padding="max_length")):
        assert all(spec.shape.is_fully_defined() for spec in dataset.element_spec.values())
    # Outputs gathered in any batch order come back in example order, fillers dropped.
    outputs = {"example_index": index[::-1].copy(), "is_real_example": weight[::-1].copy(),
               "x": index[::-1] * 10}
    assert real_outputs(outputs)["x"].tolist() == [i * 10 for i in range(11)]


def test_training_batches_are_grouped_by_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 120, 400).tolist()
    dataset = make_dataset(_features(lengths), 8, 128, is_training=True, seed=3,
                           padding="bucket")
    widths, spreads = [], []
    for batch in dataset.take(40):
        mask = batch["input_mask"].numpy()
        assert mask.shape[0] == 8
        real = mask.sum(1)
        widths.append(mask.shape[1])
        spreads.append(real.max() - real.min())
        assert mask.shape[1] % 16 == 0 and real.max() > mask.shape[1] - 16
    assert max(spreads) < 16  # one bucket per batch
    assert len(set(widths)) > 3
    first = [next(iter(make_dataset(_features(lengths), 8, 128, is_training=True, seed=seed,
                                    padding="bucket")))["example_index"].numpy().tolist()
             for seed in (3, 3, 4)]
    assert first[0] == first[1] != first[2]
    plain = next(iter(make_dataset(_features(lengths), 8, 128, is_training=True,
                                   padding="batch")))
    real = plain["input_mask"].numpy().sum(1)
    assert plain["input_mask"].shape[1] == min(128, -(-real.max() // 16) * 16)
    with pytest.raises(ValueError, match="longer than max_seq_length=64"):
        make_dataset(_features(lengths), 8, 64, is_training=True)


def test_training_epochs_visit_every_example_once_in_new_orders():
    features = _features([5 + i % 7 for i in range(24)])
    batches = make_dataset(features, 4, 64, is_training=True, padding="batch", seed=1).take(12)
    seen = [i for b in batches for i in b["example_index"].numpy().tolist()]
    assert sorted(seen[:24]) == sorted(seen[24:]) == list(range(24))
    assert seen[:24] != seen[24:]
    shares = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(2, pipeline, 2)
        batches = make_dataset(features, 8, 64, is_training=True, padding="batch",
                               input_context=context).take(3)
        shares.append({i for b in batches for i in b["example_index"].numpy().tolist()})
    assert shares[0] | shares[1] == set(range(24)) and not shares[0] & shares[1]


def test_train_and_warmup_steps():
    assert train_and_warmup_steps(1000, 32, 500) == (500, 0)
    assert train_and_warmup_steps(1000, 32, 500, num_train_epochs=3.0) == (94, 0)
    assert train_and_warmup_steps(1000, 32, 500, warmup_step=7) == (500, 7)
    assert train_and_warmup_steps(1000, 32, 500, num_train_epochs=3.0,
                                  warmup_proportion=0.1) == (94, 9)
    with pytest.raises(ValueError, match="--warmup_proportion must be in"):
        train_and_warmup_steps(1000, 32, 500, warmup_proportion=1.5)


def test_metrics():
    labels, predictions = np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1])
    assert matthews_corrcoef(labels, predictions) == pytest.approx(1 / 6)
    assert matthews_corrcoef(labels, np.ones(5, int)) == 0.0
    assert f1_score(labels, predictions) == pytest.approx(2 / 3)
    assert pearson([1, 2, 3], [2, 4, 6.5]) == pytest.approx(4.5 / np.sqrt(2 * 61 / 6))
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / np.sqrt(22.5))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_heads_compute_their_logits_in_float32(policy):
    """Under a mixed policy the heads' logits are float32 products of the encoder's output: a
    regression head whose bias has learned the scores' mean (STS-B's ~2.5) keeps each text's own
    score (in bfloat16 they all came out 2.515625); classifier logits the same."""
    from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    keras.mixed_precision.set_global_policy(policy)
    try:
        tf.keras.utils.set_random_seed(0)
        regression = AlbertClassifier(AlbertConfig(**TINY), 1, regression=True)
        classifier = AlbertClassifier(AlbertConfig(**TINY), 3)
        choice = AlbertMultipleChoice(AlbertConfig(**TINY))
        tagger = AlbertTokenClassifier(AlbertConfig(**TINY), 4)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    batch = {k: tf.constant(v) for k, v in _batch(8).items()}
    regression.output_bias.assign([2.5])
    for model in (regression, classifier):
        pooled = tf.cast(model.encoder(batch)["pooled_output"], tf.float32)
        expected = (tf.matmul(pooled, model.output_weights, transpose_b=True)
                    + model.output_bias).numpy()
        logits = model(batch)["logits"]
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(logits.numpy(), expected, rtol=0, atol=1e-4)
    scores = regression(batch)["predictions"].numpy()
    assert len(set(scores.tolist())) == len(scores), scores
    choices = {k: tf.stack([v, v[::-1]], 1) for k, v in batch.items()
               if k in ("input_word_ids", "input_mask", "input_type_ids")}
    compute = tf.bfloat16 if policy == "mixed_bfloat16" else tf.float16
    for logits in (choice(choices)["logits"], tagger(batch)["logits"], logits):
        assert logits.dtype == tf.float32
        rounded = tf.cast(tf.cast(logits, compute), tf.float32)
        assert np.mean(rounded.numpy() == logits.numpy()) < 0.2  # not computed in `compute`


@pytest.mark.parametrize("policy,rtol", [("float32", 1e-5), ("mixed_bfloat16", 0.03),
                                         ("mixed_float16", 0.01)])
def test_training_step_runs_the_last_block_at_cls_only(policy, rtol):
    """A sentence head reads [CLS] alone, so a training step runs the last block on one row a
    sequence (its intermediate matmul is [batch, intermediate]): the loss and gradients of the
    whole-sequence step, within the compute dtype's rounding, with and without XLA. Float32 on
    the grouped model (its last block: the second inner block of the second group), the reduced
    precisions on the one-block one (half the tracing and compiling)."""
    config = TINY if policy == "float32" else SMALL
    keras.mixed_precision.set_global_policy(policy)
    tf.keras.utils.set_random_seed(3)
    model = AlbertClassifier(AlbertConfig(**config), num_labels=3, classifier_dropout=0.0)
    keras.mixed_precision.set_global_policy("float32")
    batch = {k: tf.constant(v) for k, v in _batch().items()}
    n, seq = batch["input_word_ids"].shape

    def loss_and_grads(training_rows):
        with tf.GradientTape() as tape:
            if training_rows == "all":  # the whole sequence, as inference runs it
                pooled = tf.cast(model.encoder(batch, training=True)["pooled_output"],
                                 tf.float32)
                out = {"logits": tf.matmul(pooled, model.output_weights, transpose_b=True)
                       + model.output_bias}
            else:
                out = model(batch, training=True)
            sums = model.loss_sums(batch, out)
            loss = model.replica_loss(sums, model.denominators(batch))
        return loss, tape.gradient(loss, model.trainable_variables)

    def flat(grads):
        return np.concatenate([tf.convert_to_tensor(g).numpy().ravel() for g in grads])
    loss_all, grads_all = loss_and_grads("all")
    for jit in (False, True):
        step = tf.function(lambda: loss_and_grads("cls"), jit_compile=jit)
        loss, grads = step()
        assert float(loss) == pytest.approx(float(loss_all), rel=rtol)
        g, h = flat(grads), flat(grads_all)
        assert np.linalg.norm(g - h) <= rtol * np.linalg.norm(h)
    shapes = [tuple(op.outputs[0].shape) for op in step.get_concrete_function().graph
              .get_operations() if op.type in ("MatMul", "BatchMatMulV2", "BatchMatMulV3")]
    assert (n, config["intermediate_size"]) in shapes
    assert (n * seq, config["intermediate_size"]) in shapes


@pytest.mark.parametrize("policy,atol", [("float32", 1e-5), ("mixed_bfloat16", 5e-2),
                                         ("mixed_float16", 1e-2)])
def test_evaluation_and_prediction_trace_twice_whatever_the_lengths(tmp_path, policy, atol):
    """Evaluation batches come padded to a few lengths (the padding buckets): from the second
    length on, one trace serves all (a base model's trace takes seconds), with the outputs each
    length's own trace gives."""
    from albert_tf import create_optimizer
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    tf.keras.utils.set_random_seed(2)
    keras.mixed_precision.set_global_policy(policy)  # conftest sets float32 back after the test
    trainer = Trainer(tf.distribute.OneDeviceStrategy("/cpu:0"),
                      lambda: AlbertClassifier(AlbertConfig(**SMALL), num_labels=3),
                      lambda: create_optimizer(1e-3, 10, 0, "adamw"), str(tmp_path),
                      TrainerOptions(global_batch_size=6))
    batches = [_batch(seq=seq, seed=seq) for seq in (16, 12, 10, 8)]

    def dataset_fn(ctx):
        return tf.data.Dataset.from_generator(
            lambda: iter(batches), output_signature={
                k: tf.TensorSpec([None] * v.ndim, tf.as_dtype(v.dtype))
                for k, v in batches[0].items()})

    metrics = trainer.evaluate(dataset_fn)
    logits = trainer.predict(dataset_fn)["logits"]
    assert trainer._eval_fn.experimental_get_tracing_count() == 2
    assert trainer._predict_fn.experimental_get_tracing_count() == 2
    alone = [trainer.model(b, training=False)["logits"].numpy() for b in batches]
    np.testing.assert_allclose(logits, np.concatenate(alone), atol=atol)
    assert metrics["loss"] > 0 and 0 <= metrics["accuracy"] <= 1
