"""Writes XLA HLO modules from TensorFlow on a CPU, for a GPU machine without TensorFlow to
compile and run with jaxlib's XLA (bench/gpu/run_gpu.py; method in bench/gpu/README.md).

  python bench/gpu/dump_hlo.py OUT_DIR steps [--attention=MODE] name=config:batch:seq:preds ...
  python bench/gpu/dump_hlo.py OUT_DIR finetuning [--attention=MODE] \
      name=task:config:batch:seq[:choices] ...
  python bench/gpu/dump_hlo.py OUT_DIR attention

`steps`: the whole pretraining step (forward, backward, LAMB update), mixed_bfloat16, traced
with the given attention mode (plain, fused or auto; file names get it as suffix) as
distribution.setup traces it for an XLA step on a GPU (`XLA_GPU=0`: as before those choices).
`finetuning`: the same for a classifier, squad or race step (the driver's loss, AdamW; `config`
a name under configs/ or a .json path, as for `steps`). `attention`: one attention
call, forward + backward, as albert_tf's fused (cuDNN) and plain paths, on shapes for the
comparisons and the sequence-length threshold, and a dropout probe.
"""
import gzip
import json
import math
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from albert_tf import AlbertConfig, AlbertPretrainer, create_optimizer  # noqa: E402
from albert_tf.modeling.classifier import AlbertClassifier  # noqa: E402
from albert_tf.modeling.encoder import AlbertEncoder  # noqa: E402
from albert_tf.modeling.step_kernels import StepKernels  # noqa: E402
from albert_tf.modeling.multiple_choice import AlbertMultipleChoice  # noqa: E402
from albert_tf.modeling.squad import AlbertSquad  # noqa: E402
from albert_tf.data.synthetic import pretraining_batch, pretraining_step  # noqa: E402
from albert_tf.modeling import attention, kernels  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write(out, name, fn, args, meta):
    ir = fn.experimental_get_compiler_ir(*args)
    hlo = ir(stage="hlo")
    with gzip.open(os.path.join(out, name + ".hlo.pb.gz"), "wb") as f:
        f.write(ir(stage="hlo_serialized"))
    with gzip.open(os.path.join(out, name + ".hlo.gz"), "wt") as f:
        f.write(hlo)
    meta = dict(meta, name=name, custom_calls=hlo.count("custom_call_target=\"__cudnn$fmha"))
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f)
    print(name, meta, flush=True)


def dump_step(out, name, config_name, b, s, p, mode, policy="mixed_bfloat16"):
    config = _config(config_name)
    keras.mixed_precision.set_global_policy(policy)
    model = AlbertPretrainer(config, step_kernels=_step_kernels(mode))
    keras.mixed_precision.set_global_policy("float32")
    opt = create_optimizer(1e-4, 1000, 10, "lamb")
    opt.build(model.trainable_variables)
    feats = {k: tf.constant(v)
             for k, v in pretraining_batch(config.vocab_size, b, s, p).items()}

    def step(features):
        return pretraining_step(model, opt, features)

    _write(out, f"{name}_{mode}", tf.function(step, jit_compile=True), [feats], dict(
        config=config_name, batch=b, seq=s, preds=p, policy=policy, attention=mode,
        params=sum(int(np.prod(v.shape)) for v in model.trainable_variables),
        hidden=config.hidden_size, layers=config.num_hidden_layers,
        inter=config.intermediate_size, emb=config.embedding_size,
        vocab=config.vocab_size, tf=tf.__version__))


FINETUNING = {  # task: (model of an encoder, its label features: name → ("label", classes)
    "classifier": (lambda e: AlbertClassifier(e, 2), {"label_ids": ("label", 2)}),  # or
    "squad": (AlbertSquad, {"start_positions": ("position",),                       # ("position",))
                            "end_positions": ("position",)}),
    "race": (AlbertMultipleChoice, {"label_ids": ("label", 4)}),
}


def dump_finetuning(out, name, task, config_name, b, s, choices, mode):
    """The fine-tuning step of `task` (the driver's loss, AdamW as run_* scripts make it),
    batch `b` (× `choices` sequences for race) of length `s`. Its meta names each feature
    parameter's kind, so the GPU side feeds real masks, segments, ids and labels."""
    config = _config(config_name)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    build, labels = FINETUNING[task]
    model = build(AlbertEncoder(config, _step_kernels(mode)))
    keras.mixed_precision.set_global_policy("float32")
    opt = create_optimizer(5e-5, 1000, 100, "adamw")
    lead = (b, choices) if choices else (b,)
    rng = np.random.default_rng(0)
    feats = {"input_word_ids": rng.integers(5, config.vocab_size, lead + (s,)),
             "input_mask": np.ones(lead + (s,)),
             "input_type_ids": np.broadcast_to(np.arange(s) >= s // 2, lead + (s,))}
    kinds = {"input_word_ids": ("ids", config.vocab_size), "input_mask": ("mask",),
             "input_type_ids": ("segments",), **labels}
    for key, kind in labels.items():
        feats[key] = rng.integers(0, kind[1] if kind[0] == "label" else s, (b,))
    feats = {k: tf.constant(np.asarray(v), tf.int32) for k, v in feats.items()}
    model(feats, training=False)
    opt.build(model.trainable_variables)

    def step(features):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            sums = model.loss_sums(features, outputs)
            loss = model.replica_loss(sums, model.denominators(features))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    _write(out, f"{name}_{mode}", tf.function(step, jit_compile=True), [feats], dict(
            task=task, config=config_name, batch=b, seq=s, choices=choices, policy=
            "mixed_bfloat16", attention=mode, hidden=config.hidden_size,
            layers=config.num_hidden_layers, inter=config.intermediate_size,
            emb=config.embedding_size, vocab=config.vocab_size, tf=tf.__version__,
            features=[[k, *kinds[k]] for k in sorted(feats)]))


def _step_kernels(mode):
    """What distribution.setup gives an XLA step on a GPU (`XLA_GPU=0`: as before the choices
    for it, our bias + GELU kernel and XLA's column sums)."""
    return StepKernels(mode, xla_gpu=os.environ.get("XLA_GPU", "1") == "1")


def _config(config_name):
    return AlbertConfig.from_json_file(
        config_name if config_name.endswith(".json")
        else os.path.join(ROOT, "configs", config_name + ".json"))


def plain_attention(q, k, v, q_lengths, kv_lengths, scale):
    """The plain path's maths on BTNH tensors (what AttentionFfnBlock._attention computes)."""
    s = k.shape[1]
    scores = tf.einsum("btnh,bsnh->bnts", q, k)
    bias = (1.0 - tf.sequence_mask(kv_lengths, s, tf.float32))[:, None, None, :] * -10000.0
    probs = kernels.masked_softmax(scores, bias, scale)
    return tf.einsum("bnts,bsnh->btnh", probs, v)


def dump_attention_pair(out, name, b, t, s, n, h, dtype, dropout=0.0, kinds=("fused", "plain")):
    dt = tf.as_dtype(dtype)
    spec = ([tf.TensorSpec([b, t, n, h], dt)] + [tf.TensorSpec([b, s, n, h], dt)] * 2
            + [tf.TensorSpec([b], tf.int32)] * 2 + [tf.TensorSpec([b, t, n, h], dt)])
    scale = 1.0 / math.sqrt(h)

    def make(kind):
        def fwd_bwd(q, k, v, q_lengths, kv_lengths, dout):
            with tf.GradientTape() as tape:
                tape.watch([q, k, v])
                if kind == "fused":
                    o = attention.fused_attention(q, k, v, q_lengths, kv_lengths, scale, dropout)
                else:
                    o = plain_attention(q, k, v, q_lengths, kv_lengths, scale)
            return (o, *tape.gradient(o, [q, k, v], output_gradients=dout))
        return tf.function(fwd_bwd, jit_compile=True, input_signature=spec)

    zeros = [tf.zeros(x.shape, x.dtype) for x in spec]
    for kind in kinds:
        _write(out, f"{name}_{kind}", make(kind), zeros,
               dict(kind=kind, b=b, t=t, s=s, n=n, h=h, dtype=dtype, dropout=dropout))


def _fused_attention_bnth(q, k, v, q_lengths, kv_lengths, scale, dropout_rate=0.0):
    """The same cuDNN calls with q, k, v, the output and its gradient in [B, N, T, H] (the
    layout of the first probe): transposes around them instead of BTNH dot dimensions."""
    from tensorflow.compiler.tf2xla.python import xla
    dims = attention._dims
    fwd = {"bmm1_dot_dimension_numbers": dims(3, 3, (0, 1), (0, 1)),
           "bmm2_dot_dimension_numbers": dims(3, 2, (0, 1), (0, 1))}
    bwd = {"bmm1_grad_gemm1_dot_dimension_numbers": dims(2, 2, (0, 1), (0, 1)),
           "bmm1_grad_gemm2_dot_dimension_numbers": dims(3, 2, (0, 1), (0, 1)),
           "bmm2_grad_gemm1_dot_dimension_numbers": dims(2, 2, (0, 1), (0, 1)),
           "bmm2_grad_gemm2_dot_dimension_numbers": dims(3, 3, (0, 1), (0, 1))}
    b, t, n, h = q.shape.as_list()
    s = k.shape[1]
    seed = next(attention._seeds) if dropout_rate > 0 else 0

    def config(dots, backward):
        cfg = json.loads(attention.backend_config(b, n, t, s, q.dtype, scale, dropout_rate, seed,
                                                  backward))
        body = cfg["cudnn_fmha_backend_config"]
        for key in list(body):
            if key.endswith("dot_dimension_numbers"):
                del body[key]
        body.update(dots)
        return json.dumps(cfg)
    lengths = [q_lengths, kv_lengths]
    spec = tf.TensorSpec
    tr = lambda x: tf.transpose(x, [0, 2, 1, 3])  # noqa: E731

    @tf.custom_gradient
    def attend(q, k, v):
        out, stats, _ = xla.custom_call_v2(
            attention.target(dropout_rate, False), [q, k, v, *lengths],
            (spec([b, n, t, h], q.dtype), spec([b, n, t], tf.float32), spec([0], tf.uint8)),
            backend_config=config(fwd, False), has_side_effect=False)

        def grad(dout):
            return xla.custom_call_v2(
                attention.target(dropout_rate, True), [q, k, v, stats, dout, out, *lengths],
                (spec([b, n, t, h], q.dtype), spec([b, n, s, h], q.dtype),
                 spec([b, n, s, h], q.dtype), spec([0], tf.uint8)),
                backend_config=config(bwd, True), has_side_effect=False)[:3]
        return out, grad
    return tr(attend(tr(q), tr(k), tr(v)))


def main():
    if os.environ.get("ATT_LAYOUT") == "bnth":
        attention.fused_attention = _fused_attention_bnth
    variant = os.environ.get("KERNELS", "")  # measure XLA's own fusion of the elementwise work
    if "gelu" in variant:
        kernels.bias_gelu = lambda x, bias, approximate: tf.nn.gelu(
            x + tf.cast(bias, x.dtype), approximate=approximate)
    if "ln" in variant:
        kernels.layer_norm = kernels.layer_norm_reference
    rewrites = os.environ.get("XLA_GPU_REWRITES")  # a comma list, or "none": those only
    names = kernels.XLA_GPU_REWRITES if rewrites is None else (
        [] if rewrites == "none" else rewrites.split(","))
    try:
        kernels.check_rewrites(names)
    except ValueError as e:
        raise SystemExit(f"XLA_GPU_REWRITES: {e}")
    with kernels.xla_gpu_rewrites(names):
        dump(*sys.argv[1:])


def dump(out=None, what=None, *args):
    if what is None:
        raise SystemExit(__doc__)
    os.makedirs(out, exist_ok=True)
    if what == "steps":
        mode = "auto"
        if args and args[0].startswith("--attention="):
            mode, args = args[0].split("=", 1)[1], args[1:]
        for spec in args:
            name, rest = spec.split("=")
            cfg, b, s, p = rest.split(":")
            dump_step(out, name, cfg, int(b), int(s), int(p), mode)
    elif what == "finetuning":  # name=task:config:batch:seq[:choices]
        mode = "auto"
        if args and args[0].startswith("--attention="):
            mode, args = args[0].split("=", 1)[1], args[1:]
        for spec in args:
            name, rest = spec.split("=")
            task, cfg, b, s, *choices = rest.split(":")
            dump_finetuning(out, name, task, cfg, int(b), int(s), int(choices[0]) if choices
                            else 0, mode)
    elif what == "attention":
        for dtype in ("bfloat16", "float16"):
            dump_attention_pair(out, f"att_check_{dtype}", 64, 512, 512, 12, 64, dtype)
        dump_attention_pair(out, "att_last_bfloat16", 64, 21, 512, 12, 64, "bfloat16")
        for t in (128, 256, 384, 512):
            dump_attention_pair(out, f"att_time{t}", 32768 // t, t, t, 12, 64, "bfloat16")
        dump_attention_pair(out, "att_dropout", 4, 512, 512, 4, 64, "bfloat16", dropout=0.1,
                            kinds=("fused",))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
