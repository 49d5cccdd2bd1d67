"""Batch-1 latency, string in → probabilities out, of an ALBERT-base-shaped classifier:

  python bench/bench_lite.py --rounds=3

our string-in LiteRT files (float32, float16, dynamic int8, int8 calibrated on the texts' packed
ids), our raw-string serving SavedModel, and ONNX Runtime fp32 and dynamic int8
(`onnxruntime.quantization.quantize_dynamic` on transformers' export, the transformers
tokenizer in front), on sentences of 20-30 and 110-126 tokens from the bundled corpus. One set
of random weights for all (copied into transformers' model), so each quantized model's
deviation from its float32 model is measured on the same texts: the largest probability
difference and the share of texts whose predicted class changed (on random weights the classes
are near ties: a trained model's dev-set drop is what an export's tflite_report.json gives).
Medians of interleaved rounds; each round calls each model once per text.
"""

import argparse
import os
import platform
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import triton_first  # noqa: E402,F401  (before TensorFlow: bench/triton_first.py)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_inference import ONNX_INPUTS, export_onnx_classifier, text_setup  # noqa: E402
from bench_pretraining import BASE  # noqa: E402

SEQ = 128


def litert_models(model, spm, texts, workdir):
    """{name: (file bytes, run(text) -> probabilities [2])} for each quantization."""
    from albert_tf import tokenization
    from albert_tf.serving import lite
    from albert_tf.serving.saved_model import pack_texts

    graph_tokenizer = tokenization.in_graph_tokenizer(spm, True)
    sample = [{k: v.numpy() for k, v in pack_texts(graph_tokenizer, [tf.constant([t])],
                                                     SEQ).items()} for t in texts]
    out = {}
    for quantization in lite.QUANTIZATIONS:
        flatbuffer = lite.text_model_to_tflite(
            model, spm, True, SEQ, ("text_a",), lambda o: {"probabilities": o["probabilities"]},
            quantization=quantization, calibration=lambda: iter(sample),
            pad_to_seq_length=False)  # as run_classifier's export
        path = os.path.join(workdir, f"classifier_text_{quantization}.tflite")
        with open(path, "wb") as f:
            f.write(flatbuffer)
        runner = lite.interpreter(model_path=path,
                                  num_threads=os.cpu_count()).get_signature_runner()
        out[f"LiteRT {quantization}"] = (len(flatbuffer), lambda t, r=runner: r(
            text_a=np.array([t.encode()], object))["probabilities"][0])
    return out


def serving_model(model, spm, workdir):
    import tensorflow_text  # noqa: F401  (the export's tokenizer ops)

    from albert_tf.serving.finetuned import export_text_serving
    path = os.path.join(workdir, "serving")
    export_text_serving(model, path, spm, seq_length=SEQ, pad_to_longest=True,
                        output_fn=lambda o: {"probabilities": o["probabilities"]})
    serve = tf.saved_model.load(path).signatures["serving_default"]
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return {"SavedModel float32": (size, lambda t: serve(text_a=tf.constant([t]))[
        "probabilities"].numpy()[0])}


def onnx_models(model, workdir):
    """ONNX Runtime fp32 and dynamic int8 of transformers' model holding our weights."""
    import onnxruntime
    import transformers
    from onnxruntime.quantization import QuantType, quantize_dynamic

    hf_dir = os.path.join(workdir, "hf")
    model.save_pretrained(hf_dir, format="hf")
    peer = transformers.AlbertForSequenceClassification.from_pretrained(
        hf_dir, num_labels=2).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(workdir)
    names = ONNX_INPUTS
    fp32 = export_onnx_classifier(peer, tokenizer, os.path.join(workdir, "classifier.onnx"))
    int8 = os.path.join(workdir, "classifier_int8.onnx")
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)
    out = {}
    for name, path in (("ONNX Runtime fp32", fp32), ("ONNX Runtime int8", int8)):
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

        def run(text, session=session):
            feed = tokenizer([text], truncation=True, max_length=SEQ, return_token_type_ids=True,
                             return_tensors="np")
            logits = session.run(["logits"], {n: feed[n].astype(np.int64) for n in names})[0][0]
            e = np.exp(logits - logits.max())
            return e / e.sum()
        out[name] = (os.path.getsize(path), run)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=16, help="texts of each length")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; tf {tf.__version__}")

    from albert_tf import AlbertConfig
    from albert_tf.modeling.classifier import AlbertClassifier

    workdir = tempfile.mkdtemp(prefix="bench_lite_")
    spm, texts = text_setup(workdir)
    texts = {k: v[:args.texts] for k, v in texts.items()}
    tf.keras.utils.set_random_seed(0)
    model = AlbertClassifier(AlbertConfig(**BASE), num_labels=2)
    every_text = texts["short"] + texts["long"]
    model({k: tf.constant(v) for k, v in {"input_word_ids": [[2, 5, 3]],
                                          "input_mask": [[1, 1, 1]],
                                          "input_type_ids": [[0, 0, 0]]}.items()})
    models = {}
    models.update(serving_model(model, spm, workdir))
    models.update(litert_models(model, spm, every_text, workdir))
    models.update(onnx_models(model, workdir))

    reference = {t: models["SavedModel float32"][1](t) for t in every_text}
    rows = {}
    for name, (size, run) in models.items():
        got = {t: run(t) for t in every_text}  # also the warm-up
        diff = max(float(np.abs(got[t] - reference[t]).max()) for t in every_text)
        flips = np.mean([got[t].argmax() != reference[t].argmax() for t in every_text])
        rows[name] = {"MB": size / 2**20, "max |Δp|": diff, "class changed": flips,
                      "short": [], "long": []}
    for round_index in range(args.rounds):
        for name, (_, run) in models.items():
            for length, sentences in texts.items():
                start = time.perf_counter()
                for t in sentences:
                    run(t)
                ms = (time.perf_counter() - start) / len(sentences) * 1000
                rows[name][length].append(ms)
                print(f"round {round_index} {name:22s} {length:5s} {ms:8.2f} ms", flush=True)
    print("\n| model | size (MB) | short (20-30 tokens) ms | long (110-126) ms | max |Δp| vs "
          "float32 | class changed |\n|---|---|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['MB']:.1f} | {np.median(row['short']):.1f} | "
              f"{np.median(row['long']):.1f} | {row['max |Δp|']:.1e} | "
              f"{row['class changed']:.0%} |")


if __name__ == "__main__":
    main()
