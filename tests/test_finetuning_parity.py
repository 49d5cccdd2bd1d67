"""Our fine-tuning step is transformers' step: the same weights, batches and schedule, dropout
off, float32, give the same loss at every step and the same weights after them, through Keras's
`fit` and through the scripts' trainer. What is left between the two in
bench/bench_finetune_stability.py is then the random draws (dropout masks, example order, head
initialisation) and length buckets, not the update."""

import os

import numpy as np
import tensorflow as tf

from albert_tf.data import glue
from albert_tf.data.features import make_dataset
from albert_tf.data.vocab import train_sentencepiece
from albert_tf.formats.checkpoints import model_arrays
from albert_tf.formats.hf import tf1_to_hf
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.modeling.classifier import AlbertClassifier
from albert_tf.tasks import GlueTask, finetuning_options, run_finetuning
from albert_tf.modeling.optimizers import FINETUNING_UPDATE, finetuning_optimizer
from conftest import TINY, peers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEPS, WARMUP, LR = 12, 3, 3e-2


def _batch(seed=0, n=8, seq=10):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, TINY["vocab_size"], (n, seq))
    lengths = rng.integers(4, seq + 1, n)
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int64)
    types = ((np.arange(seq)[None] >= lengths[:, None] // 2) & (mask == 1)).astype(np.int64)
    return ids * mask, mask, types, rng.integers(0, 2, n)


def _torch_run(path, batches):
    """transformers' fine-tuning loop as its Trainer runs it: AdamW (decay except biases and
    LayerNorm modules), linear warmup and decay, global-norm clipping at 1.0; one batch a step
    from `batches` (one batch: every step)."""
    torch, transformers = peers()

    model = transformers.AlbertForSequenceClassification.from_pretrained(path).train()
    norms = {id(p) for m in model.modules() if isinstance(m, torch.nn.LayerNorm)
             for p in m.parameters()}
    decay = [p for n, p in model.named_parameters() if id(p) not in norms and "bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if id(p) in norms or "bias" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": FINETUNING_UPDATE["weight_decay_rate"]},
         {"params": no_decay, "weight_decay": 0.0}], lr=LR, eps=FINETUNING_UPDATE["epsilon"])
    if isinstance(batches, tuple):
        batches = [batches] * STEPS
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, WARMUP, len(batches))
    losses = []
    for batch in batches:
        ids, mask, types, labels = (torch.tensor(x) for x in batch)
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
    """Keras's `compile` (the task's own loss) and `fit` with the scripts' update: every weight
    ends within 5e-4 of transformers' after moving about 0.15: a different epsilon, decay set,
    schedule or bias correction moves some by more (float32 rounding leaves about 1e-4). The
    sequence-classification head is read from transformers' file."""
    torch, transformers = peers()

    torch.manual_seed(0)
    config = transformers.AlbertConfig(**TINY, num_labels=2, classifier_dropout_prob=0.0)
    transformers.AlbertForSequenceClassification(config).save_pretrained(str(tmp_path))
    batch = _batch()
    ours = AlbertClassifier.from_pretrained(str(tmp_path), num_labels=2, classifier_dropout=0.0)
    initial = tf1_to_hf(model_arrays(ours))
    ours.compile(optimizer=finetuning_optimizer(LR, STEPS, WARMUP))
    features = {"input_word_ids": batch[0], "input_mask": batch[1], "input_type_ids": batch[2],
                "label_ids": batch[3]}
    features = tf.data.Dataset.from_tensors(
        {k: tf.constant(v, tf.int32) for k, v in features.items()}).repeat()
    # One step an epoch: the history holds each step's loss, taken before its update.
    losses = ours.fit(features, epochs=STEPS, steps_per_epoch=1, shuffle=False,
                      verbose=0).history["loss"]

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


def _glue_dir(root, n):
    """SST-2 layout with the bundled novels task's first `n` training and 20 dev sentences."""
    data = root / "glue" / "SST-2"
    data.mkdir(parents=True)
    for split, count in (("train", n), ("dev", 20)):
        with open(os.path.join(ROOT, "data", "glue", "SST-2", f"{split}.tsv")) as f:
            lines = f.read().splitlines()[:count + 1]
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    (root / "text.txt").write_text("\n".join(line.split("\t")[0] for line in lines[1:]))
    return str(root / "glue")


def test_the_scripts_train_as_transformers_on_the_same_examples(tmp_path):
    """run_finetuning as run_classifier runs it (its batches, per-batch padding, schedule and
    clipping applied by the trainer, a checkpoint written and read back) ends where transformers'
    loop ends when it is fed the batches the trainer drew: the trainer adds nothing to the
    update."""
    torch, transformers = peers()

    n, batch_size, steps, seed = 20, 8, 9, 7  # 9 batches of 8 over 20 examples: 3.6 epochs
    data_dir = _glue_dir(tmp_path, n)
    spm = train_sentencepiece(str(tmp_path / "text.txt"), str(tmp_path / "spm"), 120,
                              hard_vocab_limit=False)
    tokenizer = load_tokenizer(spm)
    torch.manual_seed(0)
    config = transformers.AlbertConfig(**dict(TINY, vocab_size=len(tokenizer.vocab)),
                                       num_labels=2, classifier_dropout_prob=0.0)
    init = str(tmp_path / "init")
    transformers.AlbertForSequenceClassification(config).save_pretrained(init)
    task = GlueTask(glue.get_task("sst-2"), data_dir, tokenizer, 32, str(tmp_path / "cache"),
                    classifier_dropout=0.0)
    options = finetuning_options(
        output_dir=str(tmp_path / "out"), init_checkpoint=init, do_train=True, do_eval=False,
        max_seq_length=32, train_batch_size=batch_size, learning_rate=LR, train_step=steps,
        warmup_step=WARMUP, save_checkpoints_steps=steps, random_seed=seed, padding="batch",
        mixed_precision="none")
    run_finetuning(task, options)
    ours = AlbertClassifier.from_pretrained(str(tmp_path / "out"), num_labels=2)

    # The batches the trainer drew, as make_dataset gives them for --random_seed.
    batches = [tuple(batch[k].numpy().astype(np.int64) for k in
                     ("input_word_ids", "input_mask", "input_type_ids", "label_ids"))
               for batch in make_dataset(task.train_features(), batch_size, 32,
                                         is_training=True, padding="batch",
                                         seed=seed).take(steps)]
    theirs, _ = _torch_run(init, batches)
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()
             if not k.endswith("position_ids")}
    mine = tf1_to_hf(model_arrays(ours))
    initial = {k: v.detach().numpy() for k, v in transformers.AlbertForSequenceClassification
               .from_pretrained(init).state_dict().items() if k in state}
    assert max(np.abs(state[k] - initial[k]).max() for k in state) > 0.05
    for name, value in state.items():
        np.testing.assert_allclose(mine[name], value, rtol=0, atol=5e-4, err_msg=name)
