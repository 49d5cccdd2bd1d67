"""What two serving choices cost, ALBERT-base classifier, float32, in one process:

  python bench/bench_serving.py --rounds=3

1. predict on a checkpoint: the Keras model called eagerly (op by op) against one graph
   (`serving.predictor.inference_function`), batch 1 (26 tokens) and 32 (30 tokens).
2. the raw-string serving SavedModel padding every call to max_seq_length (128) against
   padding to the batch's longest text (`pad_to_longest`, what run_classifier exports), on
   sentences of 20-30 tokens from the bundled corpus, batch 1 and 32.
Medians of interleaved rounds; the outputs of each pair are compared.
"""

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_inference import inputs, text_setup  # noqa: E402
from bench_pretraining import BASE  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="calls per round at batch 1")
    args = parser.parse_args()

    import tensorflow_text  # noqa: F401  (the serving export's tokenizer ops)

    from albert_tf import AlbertConfig
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.serving.finetuned import export_text_serving
    from albert_tf.serving.predictor import inference_function

    model = AlbertClassifier(AlbertConfig(**BASE), num_labels=2)
    graph = inference_function(model)
    cells = {}
    for batch, seq in ((1, 26), (32, 30)):
        x = {k: tf.constant(v) for k, v in inputs(batch, seq).items()}
        eager = (lambda x=x: model(x, training=False)["probabilities"].numpy())
        compiled = (lambda x=x: graph(x)["probabilities"].numpy())
        print(f"checkpoint batch {batch}: max |Δp| {np.abs(eager() - compiled()).max():.1e}")
        cells[f"checkpoint batch {batch}"] = {"eager": eager, "graph": compiled}

    workdir = tempfile.mkdtemp(prefix="bench_serving_")
    spm, texts = text_setup(workdir)
    served = {}
    for pad in (False, True):
        path = os.path.join(workdir, f"export-{pad}")
        export_text_serving(model, path, spm, seq_length=128, pad_to_longest=pad,
                            output_fn=lambda out: {"probabilities": out["probabilities"]})
        served[pad] = tf.saved_model.load(path).signatures["serving_default"]
    for batch in (1, 32):
        t = tf.constant(texts["short"][:batch])
        runs = {name: (lambda fn=served[pad], t=t: fn(text_a=t)["probabilities"].numpy())
                for name, pad in (("max_seq_length", False), ("longest", True))}
        diff = np.abs(runs["max_seq_length"]() - runs["longest"]()).max()
        print(f"serving batch {batch}: max |Δp| {diff:.1e}")
        cells[f"serving short batch {batch}"] = runs

    times = {(cell, name): [] for cell, runs in cells.items() for name in runs}
    for _ in range(args.rounds):
        for cell, runs in cells.items():
            repeats = args.repeats if cell.endswith("batch 1") else 1
            for name, fn in runs.items():
                fn()
                start = time.perf_counter()
                for _ in range(repeats):
                    fn()
                times[(cell, name)].append((time.perf_counter() - start) / repeats)
    for cell, runs in cells.items():
        medians = {name: float(np.median(times[(cell, name)])) for name in runs}
        (a, ta), (b, tb) = medians.items()
        print(f"{cell}: {a} {ta * 1000:.1f} ms, {b} {tb * 1000:.1f} ms ({ta / tb:.2f}x)")


if __name__ == "__main__":
    main()
