"""Which attention a training step runs, and cuDNN's fused (flash) attention for XLA on a GPU.

The fused path is two XLA custom calls that XLA's GPU compiler hands to cuDNN
(`__cudnn$fmhaSoftmax[Dropout]` forward, `...Backward`): the [batch, heads, seq, seq] scores and
probabilities never reach GPU memory. It applies where it can run and gains:
the step is XLA-compiled for a GPU, the compute dtype is bfloat16 or float16, shapes are static,
the head size is one cuDNN takes, and the sequence is at least `min_seq` long (measured:
docs/benchmarks.md). cuDNN masks padding by sequence lengths, so the fused path takes each
input_mask to be ones then zeros (as every ALBERT input is); rows of padded queries come out as
zeros there, and nothing downstream reads them. Under `fused` the attention dropout of the v1
configs runs inside the kernel (XLA advances its random offset on every execution; each layer
gets its own seed); `auto` leaves it to the plain ops (docs/benchmarks.md says why).
"""

import contextlib
import itertools
import json

import tensorflow as tf
from absl import logging
from tensorflow.compiler.tf2xla.python import xla

MODES = ("auto", "fused", "plain")
MIN_FUSED_SEQ = 128
_HEAD_SIZES = range(8, 129, 8)

_mode = "plain"
_min_seq = MIN_FUSED_SEQ
_seeds = itertools.count(1)
_logged = set()


@contextlib.contextmanager
def using(mode, min_seq=MIN_FUSED_SEQ):
    """Trace within this block with `mode`: `plain` everywhere, `fused` wherever it can run,
    `auto` where it can run and the sequence is at least `min_seq` long. Models enter it with
    their `step_kernels.StepKernels` (the mode from resolve()), tests and HLO dumps directly."""
    global _mode, _min_seq
    if mode not in MODES:
        raise ValueError(f"--attention={mode!r}: use one of {', '.join(MODES)}")
    outer = (_mode, _min_seq)
    _mode, _min_seq = mode, min_seq
    try:
        yield
    finally:
        _mode, _min_seq = outer


def resolve(flag, jit_compile, on_gpu, on_tpu=False):
    """The mode for the --attention flag: fused attention needs the step XLA-compiled on a GPU;
    `auto` elsewhere is `plain`, a forced `fused` there is an error."""
    if flag not in MODES:
        raise ValueError(f"--attention={flag!r}: use one of {', '.join(MODES)}")
    gpu_xla = bool(jit_compile) and on_gpu and not on_tpu
    if flag == "fused" and not gpu_xla:
        raise ValueError("--attention=fused runs cuDNN attention inside an XLA-compiled step on a "
                         "GPU: it needs a GPU and --jit_compile (use --attention=auto or plain)")
    return flag if gpu_xla else "plain"


def fused_reason(dtype, batch, q_rows, kv_rows, head_size, dropout_rate, training):
    """None when this attention call runs fused under the current mode, else why not."""
    if _mode == "plain" or not training:
        return "plain mode" if _mode == "plain" else "not training"
    if dtype not in (tf.bfloat16, tf.float16):
        return f"compute dtype {dtype.name} (cuDNN fused attention takes bfloat16/float16)"
    if not all(isinstance(d, int) for d in (batch, q_rows, kv_rows)):
        return "batch or sequence length unknown when the step is traced (pad to a fixed length)"
    if head_size not in _HEAD_SIZES:
        return f"head size {head_size} (cuDNN takes multiples of 8 up to 128)"
    if _mode == "auto" and kv_rows < _min_seq:
        return f"sequence {kv_rows} < {_min_seq}, where the plain ops are as fast"
    if _mode == "auto" and dropout_rate > 0:
        return ("attention dropout (fused with --attention=fused; XLA's command buffers must "
                "leave cuDNN out: docs/benchmarks.md)")
    return None


def use_fused(dtype, batch, q_rows, kv_rows, head_size, dropout_rate, training):
    reason = fused_reason(dtype, batch, q_rows, kv_rows, head_size, dropout_rate, training)
    if _mode != "plain" and training:
        key = (reason, kv_rows, dtype)
        if key not in _logged:
            _logged.add(key)
            logging.info("Attention over %s tokens: %s", kv_rows,
                         "cuDNN fused" if reason is None else f"plain ops ({reason})")
    if reason is not None and _mode == "fused":
        raise ValueError(f"--attention=fused cannot run here: {reason}")
    return reason is None


def _dims(lhs_contracting, rhs_contracting, lhs_batch, rhs_batch):
    return {"lhs_contracting_dimensions": [str(lhs_contracting)],
            "rhs_contracting_dimensions": [str(rhs_contracting)],
            "lhs_batch_dimensions": [str(d) for d in lhs_batch],
            "rhs_batch_dimensions": [str(d) for d in rhs_batch]}


# q, k, v, the output and its gradient are [batch, seq, heads, head_size] (BTNH), the scores
# [batch, heads, q_seq, kv_seq]: the dot dimension numbers of cuDNN's six matmuls in that layout.
_FORWARD_DOTS = {
    "bmm1_dot_dimension_numbers": _dims(3, 3, (0, 2), (0, 2)),        # q·k → scores
    "bmm2_dot_dimension_numbers": _dims(3, 1, (0, 1), (0, 2)),        # probs·v → out
}
_BACKWARD_DOTS = {
    "bmm1_grad_gemm1_dot_dimension_numbers": _dims(2, 1, (0, 1), (0, 2)),  # dscores·q → dk
    "bmm1_grad_gemm2_dot_dimension_numbers": _dims(3, 1, (0, 1), (0, 2)),  # dscores·k → dq
    "bmm2_grad_gemm1_dot_dimension_numbers": _dims(2, 1, (0, 1), (0, 2)),  # probs·dout → dv
    "bmm2_grad_gemm2_dot_dimension_numbers": _dims(3, 3, (0, 2), (0, 2)),  # dout·v → dprobs
}


def backend_config(batch, heads, q_rows, kv_rows, dtype, scale, dropout_rate, seed, backward):
    """The JSON backend configuration XLA's GPU compiler reads from a cuDNN attention call."""
    layout = {"dim_level_types": [], "dim_unique": [], "dim_ordered": [],
              "minor_to_major": ["3", "2", "1", "0"], "tiles": [], "element_size_in_bits": "0",
              "memory_space": "0", "index_primitive_type": "PRIMITIVE_TYPE_INVALID",
              "pointer_primitive_type": "PRIMITIVE_TYPE_INVALID",
              "dynamic_shape_metadata_prefix_bytes": "0"}
    config = {
        "algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH",
                      "tuning_knobs": {"17": "1", "24": "0"}, "is_cudnn_frontend": True,
                      "workspace_size": "0"},
        "fmha_scale": float(scale),
        "intermediate_tensor_shape": {
            "element_type": {tf.bfloat16: "BF16", tf.float16: "F16"}[dtype],
            "dimensions": [str(d) for d in (batch, heads, q_rows, kv_rows)],
            "tuple_shapes": [], "layout": layout, "is_dynamic_dimension": [False] * 4},
        "is_flash_attention": True, "mask_type": "PADDING",
        "dropout_rate": float(dropout_rate), "seed": int(seed),
        "sliding_window_length": 0, "max_seg_per_batch": 1, "is_paged_attention": False,
        **(_BACKWARD_DOTS if backward else _FORWARD_DOTS)}
    return json.dumps({"operation_queue_id": "0", "cudnn_fmha_backend_config": config})


def target(dropout_rate, backward):
    return ("__cudnn$fmhaSoftmax" + ("Dropout" if dropout_rate > 0 else "")
            + ("Backward" if backward else ""))


def fused_attention(q, k, v, q_lengths, kv_lengths, scale, dropout_rate=0.0):
    """softmax(q·kᵀ·scale, keys past kv_lengths masked), dropout, ·v by cuDNN in one kernel.

    q [B, T, N, H], k and v [B, S, N, H] with static shapes, bfloat16 or float16; lengths int32
    [B]. Returns [B, T, N, H] (zeros in rows past q_lengths). Only inside XLA on a GPU.
    """
    batch, q_rows, heads, head_size = q.shape.as_list()
    kv_rows = k.shape[1]
    dtype = q.dtype
    seed = next(_seeds) if dropout_rate > 0 else 0
    config = dict(batch=batch, heads=heads, q_rows=q_rows, kv_rows=kv_rows, dtype=dtype,
                  scale=scale, dropout_rate=dropout_rate, seed=seed)
    lengths = [tf.cast(q_lengths, tf.int32), tf.cast(kv_lengths, tf.int32)]
    spec = tf.TensorSpec

    def bnth(rows):
        return spec([batch, heads, rows, head_size], dtype)

    @tf.custom_gradient
    def attend(q, k, v):
        out, stats, _ = xla.custom_call_v2(
            target(dropout_rate, False), [q, k, v, *lengths],
            (bnth(q_rows), spec([batch, heads, q_rows], tf.float32), spec([0], tf.uint8)),
            backend_config=backend_config(**config, backward=False), has_side_effect=False)
        out = tf.transpose(out, [0, 2, 1, 3])

        def grad(dout):
            dq, dk, dv, _ = xla.custom_call_v2(
                target(dropout_rate, True),
                [q, k, v, stats, tf.cast(dout, dtype), out, *lengths],
                (bnth(q_rows), bnth(kv_rows), bnth(kv_rows), spec([0], tf.uint8)),
                backend_config=backend_config(**config, backward=True), has_side_effect=False)
            return [tf.transpose(g, [0, 2, 1, 3]) for g in (dq, dk, dv)]
        return out, grad
    return attend(q, k, v)
