"""Fine-tuning throughput on short GLUE sentences: length bucketing vs padding to max_seq_length.

ALBERT-base shape, the bundled data/glue/CoLA training sentences, batch 32. Three runs in one
process, interleaved over rounds:
  ours-bucket   run_classifier's default input (batches grouped by length, padded per batch)
  ours-padded   the same trainer with --padding=max_length (what the original did)
  keras-hub     keras_hub.models.AlbertTextClassifier on batches padded to max_seq_length, as
                its preprocessor pads them
  python bench/bench_finetuning.py --max_seq_length=128 --steps=3 --rounds=3
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.data import glue  # noqa: E402
from albert_tf.data.features import make_dataset  # noqa: E402

BASE = dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
            num_attention_heads=12, intermediate_size=3072, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cola_features(data_dir, max_seq_length, vocab_size):
    """Features of the CoLA training split with a SentencePiece model trained on it."""
    from albert_tf.tokenization import FullTokenizer
    from albert_tf.data.vocab import train_sentencepiece
    examples = glue.read_examples(data_dir, glue.get_task("cola"), "train")
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "text.txt"), "w") as f:
        f.write("\n".join(e.text_a for e in examples))
    model = train_sentencepiece(os.path.join(tmp, "text.txt"), os.path.join(tmp, "spm"),
                                vocab_size, hard_vocab_limit=False)
    return glue.convert_examples(examples, glue.get_task("cola"), FullTokenizer(model),
                                 max_seq_length)


def ours(features, args, padding):
    """A timed step function of our Trainer with the given --padding."""
    from albert_tf import create_optimizer
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    out = tempfile.mkdtemp()
    trainer = Trainer(strategy, lambda: AlbertClassifier(AlbertConfig(**BASE), 2),
                      lambda: create_optimizer(1e-5, 10000, 100, "adamw"), out,
                      TrainerOptions(global_batch_size=args.batch_size))
    dataset = strategy.distribute_datasets_from_function(
        lambda ctx: make_dataset(features, args.batch_size, args.max_seq_length,
                                 is_training=True, input_context=ctx, padding=padding, seed=1))
    iterator = iter(dataset)

    def run(steps):
        sums = trainer._train_fn(iterator, tf.constant(steps))
        return float(sums["loss_sum"].numpy())
    return run


def keras_hub_run(features, args):
    """KerasHub AlbertTextClassifier on batches padded to max_seq_length (no preprocessor)."""
    import keras_hub
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=BASE["vocab_size"], num_layers=12, num_heads=12, embedding_dim=128,
        hidden_dim=768, intermediate_dim=3072, dropout=0.0,
        max_sequence_length=max(512, args.max_seq_length))
    model = keras_hub.models.AlbertTextClassifier(backbone, num_classes=2, preprocessor=None)
    optimizer = keras.optimizers.AdamW(1e-5)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    dataset = make_dataset(features, args.batch_size, args.max_seq_length, is_training=True,
                           padding="max_length", seed=1)
    iterator = iter(dataset.map(lambda b: ({"token_ids": b["input_word_ids"],
                                            "segment_ids": b["input_type_ids"],
                                            "padding_mask": b["input_mask"]}, b["label_ids"])))

    @tf.function
    def steps(n):
        total = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            total += loss
        return total

    return lambda n: float(steps(tf.constant(n)).numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(ROOT, "data", "glue"))
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3, help="Timed steps per run per round.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--json", help="Also write the results here.")
    args = parser.parse_args()

    features = cola_features(args.data_dir, args.max_seq_length, args.vocab_size)
    lengths = features["lengths"]
    print(f"CoLA train: {len(lengths)} sentences, tokens per sequence mean {lengths.mean():.1f}, "
          f"median {np.median(lengths):.0f}, max {lengths.max()}; max_seq_length "
          f"{args.max_seq_length}, batch {args.batch_size}, {args.precision}")
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if args.precision == "bf16" else "float32")
    keras.utils.set_random_seed(0)
    runs = {"ours-bucket": ours(features, args, "bucket"),
            "ours-padded": ours(features, args, "max_length"),
            "keras-hub": keras_hub_run(features, args)}
    for name, run in runs.items():  # trace and warm up
        run(1)
    times = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run(args.steps)
            times[name].append((time.perf_counter() - start) / args.steps)
        print(f"round {r + 1}: " + "  ".join(
            f"{n} {t[-1]:.3f}s/step" for n, t in times.items()), flush=True)
    median = {n: statistics.median(t) for n, t in times.items()}
    results = {"examples_per_second": {n: args.batch_size / t for n, t in median.items()},
               "seconds_per_step": median,
               "ratio_bucket_vs_keras_hub": median["keras-hub"] / median["ours-bucket"],
               "ratio_bucket_vs_padded": median["ours-padded"] / median["ours-bucket"],
               "ratio_padded_vs_keras_hub": median["keras-hub"] / median["ours-padded"],
               "args": vars(args), "mean_length": float(lengths.mean()),
               "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
               "tensorflow": tf.__version__, "keras": keras.__version__}
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
