"""Inference latency and throughput of the ALBERT-base encoder against KerasHub, transformers
and ONNX Runtime (the transformers model exported to ONNX).

  python bench/bench_inference.py --rounds=3
Batch 1 (latency) and batch 32 (throughput) at seq 128, fp32 and bf16, every peer built first
and then timed in interleaved rounds in this one process.
"""

import argparse
import json
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import triton_first  # noqa: E402,F401  (before TensorFlow: bench/triton_first.py)
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench_pretraining import BASE, gemm_gflops, with_policy  # noqa: E402


def inputs(batch, seq, seed=0):
    ids = np.random.default_rng(seed).integers(5, BASE["vocab_size"], (batch, seq))
    return {"input_word_ids": ids.astype(np.int32), "input_mask": np.ones_like(ids, np.int32),
            "input_type_ids": np.zeros_like(ids, np.int32)}


def ours(x, precision):
    from albert_tf import AlbertConfig, AlbertEncoder
    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    model = with_policy(policy, lambda: AlbertEncoder(AlbertConfig(**BASE)))
    x = {k: tf.constant(v) for k, v in x.items()}
    fn = tf.function(lambda: model(x, training=False)["pooled_output"])
    return lambda: fn().numpy()


def kerashub(x, precision):
    import keras_hub
    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    model = with_policy(policy, lambda: keras_hub.models.AlbertBackbone(
        vocabulary_size=BASE["vocab_size"], num_layers=12, num_heads=12, embedding_dim=128,
        hidden_dim=768, intermediate_dim=3072, dropout=0.0))
    x = {"token_ids": tf.constant(x["input_word_ids"]),
         "segment_ids": tf.constant(x["input_type_ids"]),
         "padding_mask": tf.constant(x["input_mask"])}
    fn = tf.function(lambda: model(x, training=False)["pooled_output"])
    return lambda: fn().numpy()


def transformers_torch(x, precision):
    import torch
    import transformers
    model = transformers.AlbertModel(transformers.AlbertConfig(**BASE)).eval()
    t = {"input_ids": torch.tensor(x["input_word_ids"], dtype=torch.long),
         "attention_mask": torch.tensor(x["input_mask"]),
         "token_type_ids": torch.tensor(x["input_type_ids"], dtype=torch.long)}

    def run():
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                    enabled=precision == "bf16"):
            return model(**t).pooler_output.float().numpy()
    return run


def onnxruntime_peer(x, precision):
    """The transformers model exported to ONNX (opset 17) and run by ONNX Runtime's CPU
    provider, the usual fastest CPU path; float32 only (its CPU provider has no bfloat16
    kernels for these ops)."""
    if precision != "fp32":
        return None
    import tempfile

    import onnxruntime
    import torch
    import transformers
    model = transformers.AlbertModel(transformers.AlbertConfig(**BASE)).eval()
    names = ("input_ids", "attention_mask", "token_type_ids")
    example = tuple(torch.tensor(x[k], dtype=torch.long) for k in
                    ("input_word_ids", "input_mask", "input_type_ids"))
    path = os.path.join(tempfile.mkdtemp(prefix="bench_onnx_"), "albert.onnx")
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    with torch.inference_mode():
        torch.onnx.export(model, example, path, input_names=list(names),
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {n: t.numpy() for n, t in zip(names, example)}
    return lambda: session.run(["pooler_output"], feed)[0]


PEERS = {"albert_tf": ours, "kerashub": kerashub, "transformers": transformers_torch,
         "onnxruntime": onnxruntime_peer}


# ---- text in, answer out: a fine-tuned classifier served on raw strings -----------------------

def text_setup(workdir):
    """(SentencePiece model, {"short": texts of 20-30 tokens, "long": texts of 110-126}) from
    the bundled corpus, and the Hugging Face tokenizer files of that model."""
    import glob

    from albert_tf.data.vocab import train_sentencepiece
    from albert_tf.formats.hf import write_hf_tokenizer
    from albert_tf.tokenization import FullTokenizer

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(glob.glob(os.path.join(root, "data", "corpus", "*.txt")))
    spm = train_sentencepiece(",".join(files), os.path.join(workdir, "spm"), 8000,
                              num_threads=os.cpu_count() or 1, overwrite=True)
    tokenizer = FullTokenizer(spm)
    text = " ".join(open(f, encoding="utf-8").read() for f in files).split(". ")
    sentences = [" ".join(t.split()) + "." for t in text if t.strip()]
    lengths = [len(tokenizer.encode(t)) for t in sentences[:20000]]
    texts = {"short": [t for t, n in zip(sentences, lengths) if 20 <= n <= 30][:32],
             "long": [t for t, n in zip(sentences, lengths) if 110 <= n <= 126][:32]}
    write_hf_tokenizer(tokenizer, workdir, 128)
    return spm, texts


def text_ours(workdir, spm, precision):
    """The serving SavedModel run_classifier exports; a bfloat16 run's export computes in
    bfloat16."""
    import tensorflow_text  # noqa: F401  (the serving export's tokenizer ops)

    from albert_tf import AlbertConfig
    from albert_tf.modeling.classifier import AlbertClassifier
    from albert_tf.serving.finetuned import export_text_serving

    policy = "mixed_bfloat16" if precision == "bf16" else "float32"
    model = with_policy(policy, lambda: AlbertClassifier(AlbertConfig(**BASE), num_labels=2))
    model(inputs(1, 8))
    path = os.path.join(workdir, f"serving_{precision}")
    export_text_serving(model, path, spm, seq_length=128, pad_to_longest=True,
                        output_fn=lambda out: {"probabilities": out["probabilities"]})
    serve = tf.saved_model.load(path).signatures["serving_default"]
    return lambda texts: serve(text_a=tf.constant(texts))["probabilities"].numpy()


def text_transformers(workdir, spm, precision):
    import torch
    import transformers
    model = transformers.AlbertForSequenceClassification(
        transformers.AlbertConfig(**BASE, num_labels=2)).eval()
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    tokenizer = transformers.AutoTokenizer.from_pretrained(workdir)
    pipe = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer,
                                 device="cpu", top_k=None)
    return lambda texts: pipe(texts, batch_size=len(texts), truncation=True, max_length=128)


ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export_onnx_classifier(model, tokenizer, path):
    """transformers' sequence classifier as ONNX (batch and sequence dynamic); returns path."""
    import torch
    example = tokenizer(["a short example."], return_tensors="pt", return_token_type_ids=True)
    with torch.inference_mode():
        torch.onnx.export(model, tuple(example[n] for n in ONNX_INPUTS), path,
                          input_names=list(ONNX_INPUTS), output_names=["logits"],
                          opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "sequence"} for n in ONNX_INPUTS})
    return path


def text_onnxruntime(workdir, spm, precision):
    if precision != "fp32":  # as onnxruntime_peer
        return None
    import onnxruntime
    import transformers
    model = transformers.AlbertForSequenceClassification(
        transformers.AlbertConfig(**BASE, num_labels=2)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(workdir)
    path = export_onnx_classifier(model, tokenizer, os.path.join(workdir, "classifier.onnx"))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = ONNX_INPUTS

    def run(texts):
        feed = tokenizer(texts, padding=True, truncation=True, max_length=128,
                         return_token_type_ids=True,
                         return_tensors="np")
        logits = session.run(["logits"], {n: feed[n].astype(np.int64) for n in names})[0]
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return run


TEXT_PEERS = {"albert_tf": text_ours, "transformers": text_transformers,
              "onnxruntime": text_onnxruntime}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--batch_sizes", default="1,32")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="calls per round at batch 1")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--text", action="store_true",
                        help="also time text in, answer out: a classifier on raw strings (our "
                             "serving SavedModel, a transformers pipeline, ONNX Runtime with "
                             "the transformers tokenizer), short and long sentences")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; tf {tf.__version__}, "
          f"keras {keras.__version__}; seq {args.seq_length}")
    runs = {}
    for batch in map(int, args.batch_sizes.split(",")):
        x = inputs(batch, args.seq_length)
        for precision in args.precisions.split(","):
            for peer in args.peers.split(","):
                fn = PEERS[peer](x, precision)
                if fn is None:  # this peer has no such precision
                    continue
                runs[(peer, precision, batch)] = fn
                fn()
                fn()
    if args.text:
        import tempfile
        workdir = tempfile.mkdtemp(prefix="bench_text_")
        spm, texts = text_setup(workdir)
        for precision in args.precisions.split(","):
            for name, make in TEXT_PEERS.items():
                serve = make(workdir, spm, precision)
                if serve is None:
                    continue
                for length, sentences in texts.items():
                    for batch in map(int, args.batch_sizes.split(",")):
                        batch_texts = (sentences * batch)[:batch]
                        fn = (lambda serve=serve, t=batch_texts: serve(t))
                        runs[(name, f"{precision} text {length}", batch)] = fn
                        fn()
                        fn()
    results = {key: [] for key in runs}
    for round_idx in range(args.rounds):
        print(f"round {round_idx}: GEMM calibration {gemm_gflops():.0f} GFLOP/s fp32", flush=True)
        for (peer, precision, batch), fn in runs.items():
            repeats = args.repeats if batch == 1 else 1
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            seconds = (time.perf_counter() - start) / repeats
            results[(peer, precision, batch)].append(seconds)
            print(f"  {peer:13s} {precision:10s} batch {batch:3d}: {seconds * 1000:8.1f} ms  "
                  f"{batch / seconds:7.2f} seq/s", flush=True)
    print("\nmedian over rounds (ratio = best peer time / albert_tf time):")
    summary = {}
    for (peer, precision, batch), times in results.items():
        summary.setdefault(f"{precision} batch {batch}", {})[peer] = float(np.median(times))
    for key, times in summary.items():
        peers = {p: t for p, t in times.items() if p != "albert_tf"}
        best = min(peers, key=peers.get) if peers else None
        ratio = peers[best] / times["albert_tf"] if best and "albert_tf" in times else None
        print(f"  {key}: " + ", ".join(f"{p} {t * 1000:.1f} ms" for p, t in times.items())
              + (f"  → {ratio:.2f}x {best}" if ratio else ""))
    # A bf16 cell against every peer of the same cell at any precision (ONNX Runtime has fp32
    # only, and a user choosing it runs fp32).
    for key, times in summary.items():
        if not key.startswith("bf16") or "albert_tf" not in times:
            continue
        same = {f"{p} {k.split(' ', 1)[0]}": t for k, ts in summary.items()
                if k.split(" ", 1)[1] == key.split(" ", 1)[1] for p, t in ts.items()
                if p != "albert_tf"}
        if same:
            best = min(same, key=same.get)
            print(f"  {key} vs any precision: {same[best] / times['albert_tf']:.2f}x {best}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
