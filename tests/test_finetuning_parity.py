"""Our fine-tuning step is transformers' step: the same weights, batch and schedule, dropout
off, float32, give the same loss at every step and the same weights after them. What is left
between the two in bench/bench_finetune_stability.py is then the random draws (dropout masks,
example order, head initialisation), not the update."""

import numpy as np
import tensorflow as tf

from albert_tf.formats.checkpoints import model_arrays
from albert_tf.formats.hf import tf1_to_hf
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.training.optimizers import FINETUNING_UPDATE, finetuning_optimizer
from conftest import TINY

STEPS, WARMUP, LR = 12, 3, 3e-2


def _batch(seed=0, n=8, seq=10):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, TINY["vocab_size"], (n, seq))
    lengths = rng.integers(4, seq + 1, n)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int64)
    types = ((np.arange(seq)[None] >= lengths[:, None] // 2) & (mask == 1)).astype(np.int64)
    return ids * mask, mask, types, rng.integers(0, 2, n)


def _torch_run(path, batch):
    """transformers' fine-tuning loop as its Trainer runs it: AdamW (decay except biases and
    LayerNorm modules), linear warmup and decay, global-norm clipping at 1.0."""
    import torch
    import transformers

    model = transformers.AlbertForSequenceClassification.from_pretrained(path).train()
    norms = {id(p) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)
             for p in m.parameters()}
    decay = [p for n, p in model.named_parameters() if id(p) not in norms and "bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if id(p) in norms or "bias" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": FINETUNING_UPDATE["weight_decay_rate"]},
         {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=FINETUNING_UPDATE["epsilon"])
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, WARMUP, STEPS)
    ids, mask, types, labels = (torch.tensor(x) for x in batch)
    losses = []
    for _ in range(STEPS):
        loss = model(input_ids=ids, attention_mask=mask, token_type_ids=types,
                     labels=labels).loss
        losses.append(float(loss.detach()))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return model, np.array(losses)


def test_our_fine_tuning_steps_are_transformers_steps(tmp_path):
    """Every weight ends within 5e-4 of transformers' after moving about 0.15: a different
    epsilon, decay set, schedule or bias correction moves some by more (float32 rounding
    leaves about 1e-4). The sequence-classification head is read from transformers' file."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.AlbertConfig(**TINY, num_labels=2, classifier_dropout_prob=0.0)
    transformers.AlbertForSequenceClassification(config).save_pretrained(str(tmp_path))
    batch = _batch()
    ours = AlbertClassifier.from_pretrained(str(tmp_path), num_labels=2, classifier_dropout=0.0)
    initial = tf1_to_hf(model_arrays(ours))
    optimizer = finetuning_optimizer(LR, STEPS, WARMUP)
    features = {"input_word_ids": batch[0], "input_mask": batch[1], "input_type_ids": batch[2],
                "label_ids": batch[3]}
    features = {k: tf.constant(v, tf.int32) for k, v in features.items()}
    losses = []
    for _ in range(STEPS):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(ours.per_example_loss(features, ours(features, training=True)))
        variables = ours.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        losses.append(float(loss))

    theirs, their_losses = _torch_run(str(tmp_path), batch)
    assert their_losses[-1] < their_losses[0] - 0.1  # it trains: the comparison means something
    np.testing.assert_allclose(losses, their_losses, rtol=0, atol=2e-5)
    mine = tf1_to_hf(model_arrays(ours))
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()
             if not k.endswith("position_ids")}
    assert sorted(mine) == sorted(state)
    assert max(np.abs(state[k] - initial[k]).max() for k in state) > 0.1
    for name, value in state.items():
        np.testing.assert_allclose(mine[name], value, rtol=0, atol=5e-4, err_msg=name)
