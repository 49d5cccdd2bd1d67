"""The fused training kernels equal autodiff of the plain formulas, alone and inside the model."""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer
from albert_tf.modeling import kernels

TOL = {tf.float32: 2e-5, tf.bfloat16: 2e-2}


def _value_and_grads(fn, inputs, seed):
    """fn(*inputs) and d(sum(fn * w))/d(inputs) for a fixed random w."""
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = fn(*inputs)
        w = tf.random.stateless_normal(out.shape, [seed, 1])
        loss = tf.reduce_sum(tf.cast(out, tf.float32) * w)
    return out, tape.gradient(loss, inputs)


def _assert_same(fused, plain, dtype):
    (out_f, grads_f), (out_p, grads_p) = fused, plain
    assert out_f.dtype == out_p.dtype
    tol = TOL[dtype]
    np.testing.assert_allclose(tf.cast(out_f, tf.float32), tf.cast(out_p, tf.float32),
                               rtol=tol, atol=tol)
    for g_f, g_p in zip(grads_f, grads_p):
        assert g_f.dtype == g_p.dtype and g_f.shape == g_p.shape
        scale = float(tf.reduce_max(tf.abs(tf.cast(g_p, tf.float32))))
        np.testing.assert_allclose(tf.cast(g_f, tf.float32), tf.cast(g_p, tf.float32),
                                   atol=tol * scale)


def _normal(shape, seed, dtype=tf.float32, scale=1.0):
    return tf.cast(scale * tf.random.stateless_normal(shape, [seed, 0]), dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("approximate", [True, False])
def test_bias_gelu(dtype, approximate):
    inputs = [_normal([3, 5, 24], 1, dtype, 2.0), _normal([24], 2)]

    def plain(x, bias):
        y = tf.nn.gelu(tf.cast(x, tf.float32) + bias, approximate=approximate)
        return tf.cast(y, dtype)
    _assert_same(_value_and_grads(lambda x, b: kernels.bias_gelu(x, b, approximate), inputs, 3),
                 _value_and_grads(plain, inputs, 3), dtype)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
@pytest.mark.parametrize("residual,bias", [(False, False), (True, False), (True, True)])
def test_layer_norm(dtype, residual, bias):
    parts = [_normal([4, 6, 32], 1, dtype, 3.0)] + ([_normal([4, 6, 32], 2, dtype)]
                                                    if residual else [])
    n = len(parts)
    inputs = parts + [_normal([32], 3) + 1.0, _normal([32], 4)] + ([_normal([32], 5)]
                                                                    if bias else [])

    def run(fn):
        return lambda *a: fn(a[:n], a[n], a[n + 1], 1e-12, dtype, *a[n + 2:])
    _assert_same(_value_and_grads(run(kernels.layer_norm), inputs, 5),
                 _value_and_grads(run(kernels.layer_norm_reference), inputs, 5), dtype)


def test_layer_norm_float32_input_to_bfloat16_output():
    # The embeddings' LayerNorm: float32 sum in, compute dtype out, float32 gradient back.
    inputs = [_normal([2, 7, 8], 1), tf.ones([8]), tf.zeros([8])]
    out, grads = _value_and_grads(
        lambda x, g, b: kernels.layer_norm((x,), g, b, 1e-12, tf.bfloat16), inputs, 2)
    assert out.dtype == tf.bfloat16 and grads[0].dtype == tf.float32
    x = inputs[0].numpy()
    expected = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True)
    np.testing.assert_allclose(tf.cast(out, tf.float32), expected, atol=3e-2)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_masked_softmax(dtype):
    scores = _normal([2, 3, 5, 5], 1, dtype, 4.0)
    mask = tf.constant([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], tf.float32)
    bias = (1.0 - mask)[:, None, None, :] * -10000.0
    fused = _value_and_grads(lambda s: kernels.masked_softmax(s, bias, 0.125), [scores], 2)
    plain = _value_and_grads(lambda s: kernels.softmax_reference(s, bias, 0.125), [scores], 2)
    _assert_same(fused, plain, dtype)
    np.testing.assert_allclose(tf.cast(fused[0], tf.float32)[0, :, :, 3:], 0.0)
    np.testing.assert_allclose(tf.reduce_sum(tf.cast(fused[0], tf.float32), -1), 1.0,
                               rtol=TOL[dtype])


def test_training_step_equals_the_plain_ops(tiny_config, batch):
    """Loss and every gradient of the pretrainer: fused kernels vs plain ops (training=True)."""
    model = AlbertPretrainer(tiny_config)
    features = {**batch, "masked_lm_ids": np.array([[5, 6, 9], [12, 3, 14]], np.int32),
                "masked_lm_weights": np.ones((2, 3), np.float32),
                "next_sentence_labels": np.array([[0], [1]], np.int32)}

    @tf.function
    def loss_and_grads():
        with tf.GradientTape() as tape:
            loss = model.compute_loss(features, y_pred=model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    fused_loss, fused_grads = loss_and_grads()
    with kernels.unfused():
        plain_loss, plain_grads = tf.function(loss_and_grads.python_function)()
    np.testing.assert_allclose(fused_loss, plain_loss, rtol=1e-6)
    assert len(fused_grads) == len(model.trainable_variables)
    for var, g_f, g_p in zip(model.trainable_variables, fused_grads, plain_grads):
        np.testing.assert_allclose(g_f, g_p, atol=1e-6, rtol=1e-4, err_msg=var.path)
    assert float(tf.linalg.global_norm(fused_grads)) > 0


def test_shared_weight_cast_once_keeps_float32_gradient_per_use():
    w = tf.Variable(tf.random.stateless_normal([6, 6], [1, 2]))
    x0 = tf.cast(tf.random.stateless_normal([4, 6], [3, 4]), tf.bfloat16)

    def chain(shared):
        @tf.function
        def run():
            with tf.GradientTape() as tape:
                x = x0
                with kernels.shared_weight_casts() if shared else contextlib.nullcontext():
                    for _ in range(3):
                        x = tf.tanh(tf.matmul(x, kernels.cast_weight(w, tf.bfloat16)))
                loss = tf.reduce_sum(tf.cast(x, tf.float32))
            return loss, tape.gradient(loss, w)
        graph = run.get_concrete_function().graph
        casts = [op for op in graph.get_operations() if op.type == "Cast"
                 and op.inputs[0].dtype == tf.float32 and op.outputs[0].dtype == tf.bfloat16]
        return run(), len(casts)

    (loss_shared, grad_shared), casts_shared = chain(True)
    (loss_each, grad_each), casts_each = chain(False)
    # One cast of w instead of three; the other float32→bfloat16 cast is the loss's gradient.
    assert (casts_shared, casts_each) == (2, 4)
    assert grad_shared.dtype == tf.float32
    np.testing.assert_array_equal(loss_shared, loss_each)
    np.testing.assert_allclose(grad_shared, grad_each, rtol=1e-6)
