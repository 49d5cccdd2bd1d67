"""cuDNN fused attention, checked where a CPU can: the HLO a GPU-targeted step holds, and the
plain path wherever the fused one does not apply. (Outputs and speed on a GPU:
bench/gpu/, docs/benchmarks.md.)"""

import json
import math
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.modeling import attention, kernels
from tests.conftest import SMALL, TINY

BATCH, SEQ, PREDS = 2, 16, 3
BLOCK_CALLS = TINY["num_hidden_layers"] * TINY["inner_group_num"]


def _features(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, TINY["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    mask = (np.arange(SEQ)[None] < np.array([[SEQ], [11]])).astype(np.int32)
    return {"input_word_ids": tf.constant(ids * mask), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant((np.arange(SEQ)[None] >= 6).astype(np.int32)
                                          .repeat(BATCH, 0)),
            "masked_lm_positions": tf.constant([[1, 4, 7], [2, 3, 9]], tf.int32),
            "masked_lm_ids": tf.constant([[5, 6, 7], [8, 9, 10]], tf.int32),
            "masked_lm_weights": tf.constant(np.ones((BATCH, PREDS), np.float32)),
            "next_sentence_labels": tf.constant([[0], [1]], tf.int32)}


def _model(policy, **overrides):
    keras.mixed_precision.set_global_policy(policy)
    model = AlbertPretrainer(AlbertConfig(**{**TINY, **overrides}))
    keras.mixed_precision.set_global_policy("float32")
    return model


def _loss_and_grads(model, features):
    with tf.GradientTape() as tape:
        sums = model.loss_sums(features, model(features, training=True))
        loss = model.replica_loss(sums, sums)
    return loss, tape.gradient(loss, model.trainable_variables)


def _step_hlo(model, mode, min_seq=attention.MIN_FUSED_SEQ):
    fn = tf.function(lambda f: _loss_and_grads(model, f), jit_compile=True)
    with attention.using(mode, min_seq):
        return fn.experimental_get_compiler_ir(_features())(stage="hlo")


def _custom_calls(hlo):
    """(target, operand shapes, result shapes, backend config) of each cuDNN attention call."""
    calls = []
    for line in hlo.splitlines():
        m = re.search(r'= \((.*?)\) custom-call\((.*?)\), custom_call_target="(__cudnn\$fmha\w+)"',
                      line)
        if m:
            config = re.search(r"backend_config=(\{.*\})", line).group(1)
            config = json.loads(config.encode().decode("unicode_escape")) if config.startswith(
                "{\\") else json.loads(config)
            shapes = lambda text: re.findall(r"(\w+)\[([\d,]*)\]", text)  # noqa: E731
            calls.append((m.group(3), shapes(m.group(2)), shapes(m.group(1)),
                          config["cudnn_fmha_backend_config"]))
    return calls


@pytest.mark.parametrize("policy,element", [("mixed_bfloat16", "bf16"),
                                            ("mixed_float16", "f16")])
def test_gpu_step_hlo_holds_cudnn_attention_forward_and_backward(policy, element):
    model = _model(policy)
    calls = _custom_calls(_step_hlo(model, "fused"))
    blocks, heads, size = BLOCK_CALLS, TINY["num_attention_heads"], 8
    forward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmax"]
    backward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmaxBackward"]
    assert len(forward) == len(backward) == blocks, [c[0] for c in calls]
    # every block attends over the whole sequence; the last one only from [CLS] + the positions
    assert sorted(int(c[1][0][1].split(",")[1]) for c in forward) == [PREDS + 1] + [SEQ] * (
        blocks - 1)
    full = f"{BATCH},{SEQ},{heads},{size}"
    for _, operands, results, config in forward:
        rows = int(operands[0][1].split(",")[1])
        q = f"{BATCH},{rows},{heads},{size}"
        assert operands == [(element, q), (element, full), (element, full), ("s32", "2"),
                            ("s32", "2")]
        assert results == [(element, f"{BATCH},{heads},{rows},{size}"),
                           ("f32", f"{BATCH},{heads},{rows}"), ("u8", "0")]
        assert config["fmha_scale"] == pytest.approx(1 / math.sqrt(size))
        assert config["mask_type"] == "PADDING" and config["is_flash_attention"] is True
        assert config["dropout_rate"] == 0
        assert config["intermediate_tensor_shape"]["dimensions"] == [
            str(BATCH), str(heads), str(rows), str(SEQ)]
        assert config["intermediate_tensor_shape"]["element_type"] == element.upper()
        assert config["bmm1_dot_dimension_numbers"]["lhs_batch_dimensions"] == ["0", "2"]
    for _, operands, results, config in backward:
        assert len(operands) == 8 and operands[3][0] == "f32"  # q, k, v, stats, dout, out, lens
        assert [r[0] for r in results] == [element] * 3 + ["u8"]
        assert "bmm2_grad_gemm2_dot_dimension_numbers" in config


def test_attention_dropout_gets_the_dropout_calls_and_a_seed_per_layer():
    model = _model("mixed_bfloat16", attention_probs_dropout_prob=0.1)
    calls = _custom_calls(_step_hlo(model, "fused"))
    forward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmaxDropout"]
    backward = [c for c in calls if c[0] == "__cudnn$fmhaSoftmaxDropoutBackward"]
    assert len(forward) == len(backward) == BLOCK_CALLS
    assert {c[3]["dropout_rate"] for c in forward} == {0.1}
    seeds = [c[3]["seed"] for c in forward]
    assert len(set(seeds)) == len(seeds)
    assert sorted(c[3]["seed"] for c in backward) == sorted(seeds)
    # auto leaves attention dropout to the plain ops (docs/benchmarks.md)
    assert not _custom_calls(_step_hlo(model, "auto", min_seq=1))


def test_auto_falls_back_to_the_plain_path_with_its_results():
    features = _features()
    model = _model("mixed_bfloat16")
    assert not _custom_calls(_step_hlo(model, "auto"))  # SEQ 16 < MIN_FUSED_SEQ
    assert len(_custom_calls(_step_hlo(model, "auto", min_seq=SEQ))) == 2 * BLOCK_CALLS
    assert not _custom_calls(_step_hlo(_model("float32"), "auto", min_seq=1))
    assert not _custom_calls(_step_hlo(model, "plain"))
    with attention.using("plain"):
        loss, grads = _loss_and_grads(model, features)
    with attention.using("auto"):
        loss_auto, grads_auto = _loss_and_grads(model, features)
    assert float(loss_auto) == float(loss)
    for g, h in zip(grads, grads_auto):
        np.testing.assert_array_equal(tf.convert_to_tensor(g).numpy(),
                                      tf.convert_to_tensor(h).numpy())


def test_forced_fused_says_why_it_cannot_run():
    with pytest.raises(ValueError, match="compute dtype float32"):
        _step_hlo(_model("float32"), "fused")
    with pytest.raises(ValueError, match="needs a GPU and --jit_compile"):
        attention.resolve("fused", jit_compile=True, on_gpu=False)
    with pytest.raises(ValueError, match="needs a GPU and --jit_compile"):
        attention.resolve("fused", jit_compile=False, on_gpu=True)
    assert attention.resolve("auto", jit_compile=False, on_gpu=True) == "plain"
    assert attention.resolve("auto", jit_compile=True, on_gpu=True, on_tpu=True) == "plain"
    assert attention.resolve("auto", jit_compile=True, on_gpu=True) == "auto"
    assert attention.resolve("fused", jit_compile=True, on_gpu=True) == "fused"
    with pytest.raises(ValueError, match="--attention='flash'"):
        attention.resolve("flash", True, True)


@pytest.mark.parametrize("policy,rtol", [("float32", 1e-4), ("mixed_bfloat16", 0.05),
                                         ("mixed_float16", 0.01)])
def test_xla_gpu_step_is_the_kernels_maths(policy, rtol):
    """On a GPU under XLA, bias + GELU is the plain formula for XLA to fuse and the bias
    gradients are products with a row of ones: the same loss and gradients as the kernels,
    within the compute dtype's rounding (one shared block run twice: the maths is per block)."""
    features = _features()
    model = _model(policy, **SMALL)
    loss, grads = _loss_and_grads(model, features)
    with kernels.on_xla_gpu():
        step = tf.function(lambda f: _loss_and_grads(model, f), jit_compile=True)
        loss_xla, grads_xla = step(features)
    assert float(loss_xla) == pytest.approx(float(loss), rel=rtol / 10)
    # Over all gradients at once: a single small tensor (a bias whose terms cancel) can differ by
    # more than the compute dtype's rounding on some CPUs, the whole gradient cannot.
    g = np.concatenate([tf.convert_to_tensor(x).numpy().ravel() for x in grads])
    h = np.concatenate([tf.convert_to_tensor(x).numpy().ravel() for x in grads_xla])
    assert np.linalg.norm(h - g) <= rtol * np.linalg.norm(g)


def test_xla_gpu_bias_gradients_are_products_with_ones():
    """Each bias, LayerNorm beta and gamma gradient of an XLA step on a GPU is a [1, rows] x
    [rows, width] product accumulated in float32 (cuBLAS reads the gradient once), none
    elsewhere: per block call the query and intermediate biases, and each LayerNorm's gamma,
    beta and folded projection bias (8: the key bias is not added, the value bias joins the
    output projection's; without those rewrites 10, and 9 with attention dropout, where the
    value bias stays); the embedding projection, the pooler and the MLM dense layer, the
    embedding's and the MLM head's LayerNorm gamma and beta (7). SMALL's one block, called twice."""
    model = _model("mixed_bfloat16", **SMALL)
    calls = SMALL["num_hidden_layers"] * SMALL["inner_group_num"]
    ones_dot = re.compile(r"= f32\[1,\d+\]\{[\d,]*\} dot\(")
    assert not ones_dot.findall(_step_hlo(model, "plain"))
    with kernels.on_xla_gpu():
        assert len(ones_dot.findall(_step_hlo(model, "plain"))) == 8 * calls + 7
        dropout = _model("mixed_bfloat16", **{**SMALL, "attention_probs_dropout_prob": 0.1})
        assert len(ones_dot.findall(_step_hlo(dropout, "plain"))) == 9 * calls + 7
        with kernels.xla_gpu_rewrites([]):
            assert len(ones_dot.findall(_step_hlo(model, "plain"))) == 10 * calls + 7


def _xla_gpu_step(names, model, features):
    """Loss and gradients of `model`'s XLA step on a GPU with the rewrites `names` only."""
    with kernels.on_xla_gpu(), kernels.xla_gpu_rewrites(names):
        return tf.function(lambda f: _loss_and_grads(model, f), jit_compile=True)(features)


@pytest.fixture(scope="module")
def small_step_without_rewrites():
    model, features = _model("float32", **SMALL), _features()
    return model, features, _xla_gpu_step([], model, features)


@pytest.mark.parametrize("rewrite", kernels.XLA_GPU_REWRITES)
def test_each_xla_gpu_rewrite_keeps_every_gradient(rewrite, small_step_without_rewrites):
    """Each rewrite of the XLA step on a GPU, alone, in float32: the loss and every variable's
    gradient as without any (the key bias's is zero with it, and nearly so without: softmax
    ignores it)."""
    model, features, (loss, grads) = small_step_without_rewrites
    loss_new, grads_new = _xla_gpu_step([rewrite], model, features)
    assert float(loss_new) == pytest.approx(float(loss), rel=1e-6)
    scale = np.sqrt(np.mean([np.mean(tf.convert_to_tensor(g).numpy() ** 2) for g in grads]))
    for var, g, h in zip(model.trainable_variables, grads, grads_new):
        g, h = tf.convert_to_tensor(g).numpy(), tf.convert_to_tensor(h).numpy()
        if rewrite == "key_bias" and "key/bias" in var.path:
            assert not h.any(), var.path
            assert np.abs(g).max() <= 1e-5 * scale, var.path
            continue
        np.testing.assert_allclose(h, g, rtol=1e-4, atol=1e-6 * scale, err_msg=var.path)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_kernel_is_the_formula_and_its_gradient(approximate):
    x = tf.constant(np.random.default_rng(0).normal(0, 2, (64, 24)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = kernels.gelu(x, approximate)
        plain = tf.nn.gelu(x, approximate=approximate)
    np.testing.assert_allclose(ours.numpy(), plain.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(ours, x).numpy(), tape.gradient(plain, x).numpy(),
                               rtol=1e-5, atol=1e-5)
