"""Fused elementwise kernels for training: bias+GELU, residual+LayerNorm, scaled masked softmax.

Each kernel is one XLA-compiled function forward and one backward (tf.custom_gradient), working
in float32 whatever the input dtype and saving only its inputs (the backward recomputes the
cheap intermediates). Around the oneDNN/cuBLAS matmuls this replaces the dozen small
bfloat16/float32 elementwise ops, casts and reductions TensorFlow runs per layer for autodiff
of the plain formulas. The plain formulas (`*_reference`) define the maths: inference, export
and `kernels.unfused()` use them, and the tests hold the kernels to them.
"""

import contextlib
import math

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla

from albert_tf.tracing import graph_function

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_K = 0.044715
_unfused_depth = 0


@contextlib.contextmanager
def unfused():
    """Trace models with the plain ops only (portable SavedModels, no XLA functions inside)."""
    global _unfused_depth
    _unfused_depth += 1
    try:
        yield
    finally:
        _unfused_depth -= 1


def enabled(training):
    """Whether a layer called with `training` should use the fused kernels."""
    return bool(training) and _unfused_depth == 0


_xla_gpu = False


@contextlib.contextmanager
def on_xla_gpu(flag=True):
    """Trace within this block as for a step XLA-compiled on a GPU (`flag`), or not; models
    enter it with their `step_kernels.StepKernels`, tests and HLO dumps directly."""
    global _xla_gpu
    outer, _xla_gpu = _xla_gpu, bool(flag)
    try:
        yield
    finally:
        _xla_gpu = outer


# What an XLA step on a GPU traces differently to move fewer bytes, each the same maths
# (tests/test_attention.py) and measured by compiling for a GPU (docs/benchmarks.md); the HLO
# dumps leave some out to measure them (bench/gpu/dump_hlo.py, XLA_GPU_REWRITES). `key_bias`:
# the key bias is not added (softmax ignores it); `value_bias`: it joins the output
# projection's; `gelu`: the slope recomputed from its input; `ln_low_dgamma`: gamma's gradient
# from a bfloat16 product; `ln_barrier`: see layer_norm; `colsum_apart`: see _column_sum.
XLA_GPU_REWRITES = ("key_bias", "value_bias", "gelu", "ln_low_dgamma", "ln_barrier",
                    "colsum_apart")
_rewrites = frozenset(XLA_GPU_REWRITES)


def rewritten(name, training=True):
    """Whether the XLA-on-GPU rewrite `name` applies to what is traced now."""
    return enabled(training) and _xla_gpu and name in _rewrites


def check_rewrites(names):
    """`names`, each one of XLA_GPU_REWRITES (else ValueError naming the unknown ones)."""
    unknown = sorted(set(names) - set(XLA_GPU_REWRITES))
    if unknown:
        raise ValueError(f"unknown rewrites {', '.join(unknown)}: use none or some of "
                         f"{','.join(XLA_GPU_REWRITES)}")
    return names


@contextlib.contextmanager
def xla_gpu_rewrites(names):
    """Trace within this block with only the XLA-on-GPU rewrites `names`."""
    global _rewrites
    outer, _rewrites = _rewrites, frozenset(check_rewrites(names))
    try:
        yield
    finally:
        _rewrites = outer


def gelu_enabled(training):
    """Whether bias + GELU runs as the kernel below: not in an XLA step on a GPU, where XLA fuses
    the bias add and GELU itself, faster as measured (docs/benchmarks.md), and `gelu` below
    gives it the backward (the `gelu` rewrite)."""
    return enabled(training) and not _xla_gpu


def _f32(x):
    return tf.cast(x, tf.float32)


def _column_sum(x, by_dot=False, low_dtype=None, apart=False):
    """Sum over every axis but the last. `by_dot` (an XLA step on a GPU): a product of a row of
    ones with x in `low_dtype` (x's own by default), accumulated in float32: cuBLAS reads x
    once, where XLA's column reductions recompute x's producers (docs/benchmarks.md).
    `apart`: the rewrite `colsum_apart`."""
    x = tf.reshape(x, [-1, tf.shape(x)[-1]])
    if not by_dot:
        return tf.reduce_sum(x, 0)
    low = tf.cast(x, low_dtype or x.dtype)
    ones = tf.ones([1, tf.shape(x)[0]], low.dtype)
    if apart:  # else XLA merges products with the same row of ones into one product over a
        # float32 concatenation of every x (3.9 GB in RACE's step at 8 x 4 x 512)
        ones, low = xla.optimization_barrier(ones, low)
    return tf.reshape(tf.linalg.matmul(ones, low, output_type=tf.float32), [-1])


def bias_add(y, bias):
    """y + bias (float32 [width], cast to y's dtype); the bias's gradient a `_column_sum`."""
    if not _xla_gpu:
        return tf.nn.bias_add(y, tf.cast(bias, y.dtype))

    apart = rewritten("colsum_apart")

    @tf.custom_gradient
    def fn(y, bias):
        def grad(dy):
            return dy, tf.cast(_column_sum(dy, True, apart=apart), bias.dtype)
        return tf.nn.bias_add(y, tf.cast(bias, y.dtype)), grad
    return fn(y, bias)


def unused_bias(y, bias):
    """y, with a zero gradient for `bias`: a bias the result does not depend on (the key
    projection's under softmax, which any shift of a query's scores leaves unchanged) is
    not added, and its variable still gets a gradient."""
    @tf.custom_gradient
    def fn(y, bias):
        return tf.identity(y), lambda dy: (dy, tf.zeros_like(bias))
    return fn(y, bias)


# --- shared weights cast once per call ---------------------------------------------------------

_weight_casts = None


@contextlib.contextmanager
def shared_weight_casts():
    """Within this block, `cast_weight` casts each variable once, however many layers use it."""
    global _weight_casts
    outer, _weight_casts = _weight_casts, {}
    try:
        yield
    finally:
        _weight_casts = outer


def cast_weight(variable, dtype):
    """`variable` as `dtype`; inside `shared_weight_casts` the cast is made once and reused,
    while each use still sends its own float32 gradient back to the variable."""
    w = tf.convert_to_tensor(variable)
    if _weight_casts is None or w.dtype == dtype:
        return tf.cast(w, dtype)
    key = (id(variable), dtype)
    if key not in _weight_casts:
        _weight_casts[key] = tf.cast(tf.stop_gradient(w), dtype)
    low = _weight_casts[key]

    @tf.custom_gradient
    def reuse(w):
        return tf.identity(low), lambda dy: tf.cast(dy, w.dtype)
    return reuse(w)


# --- bias + GELU -------------------------------------------------------------------------------

def _gelu(y, approximate):
    if approximate:
        return 0.5 * y * (1.0 + tf.tanh(_GELU_C * (y + _GELU_K * y * y * y)))
    return 0.5 * y * (1.0 + tf.math.erf(y * (1.0 / math.sqrt(2.0))))


def _gelu_slope(y, approximate, apart=False):
    """d gelu / dy. `apart`: the tanh or erf argument written unlike `_gelu`'s (the same
    number), so that in one XLA step CSE does not merge the two and keep the forward's float32
    tanh or erf for the backward, another tensor the size of y."""
    if approximate:
        u = y * (_GELU_C + (_GELU_C * _GELU_K) * y * y) if apart else _GELU_C * (
            y + _GELU_K * y * y * y)
        t = tf.tanh(u)
        return 0.5 * (1.0 + t) + 0.5 * y * (1.0 - t * t) * _GELU_C * (1.0 + 3 * _GELU_K * y * y)
    if apart:
        cdf = 0.5 * tf.math.erfc(y * (-1.0 / math.sqrt(2.0)))
    else:
        cdf = 0.5 * (1.0 + tf.math.erf(y * (1.0 / math.sqrt(2.0))))
    return cdf + y * tf.exp(-0.5 * y * y) * (1.0 / math.sqrt(2.0 * math.pi))


@graph_function(jit_compile=True)
def _bias_gelu_fwd(x, bias, approximate):
    return tf.cast(_gelu(_f32(x) + bias, approximate), x.dtype)


@graph_function(jit_compile=True)
def _bias_gelu_bwd(dy, x, bias, approximate):
    dx = _f32(dy) * _gelu_slope(_f32(x) + bias, approximate)
    return tf.cast(dx, x.dtype), _column_sum(dx)


def bias_gelu(x, bias, approximate=True):
    """gelu(x + bias); `bias` float32 [width], `x` any float dtype [..., width]."""

    @tf.custom_gradient
    def fn(x, bias):
        def grad(dy):
            return _bias_gelu_bwd(dy, x, bias, approximate)
        return _bias_gelu_fwd(x, bias, approximate), grad
    return fn(x, bias)


def gelu(y, approximate=True):
    """gelu(y) in float32, returned in y's dtype, for an XLA step on a GPU (XLA fuses the bias
    add before it); the backward recomputes the slope from y alone, where autodiff of the
    formula keeps its tanh too."""
    @tf.custom_gradient
    def fn(y):
        def grad(dy):
            return tf.cast(_f32(dy) * _gelu_slope(_f32(y), approximate, apart=True), y.dtype)
        return tf.cast(_gelu(_f32(y), approximate), y.dtype), grad
    return fn(y)


# --- residual + LayerNorm ----------------------------------------------------------------------

def _sum(parts, bias):
    z = tf.add_n([_f32(p) for p in parts])
    return z if bias is None else z + bias


def layer_norm_reference(parts, gamma, beta, epsilon, out_dtype, bias=None):
    z = _sum(parts, bias)
    mean, var = tf.nn.moments(z, axes=[-1], keepdims=True)
    return tf.cast((z - mean) * tf.math.rsqrt(var + epsilon) * gamma + beta, out_dtype)


def _normalize(parts, bias, epsilon):
    z = _sum(parts, bias)
    centred = z - tf.reduce_mean(z, -1, keepdims=True)
    rstd = tf.math.rsqrt(tf.reduce_mean(centred * centred, -1, keepdims=True) + epsilon)
    return centred * rstd, rstd


@graph_function(jit_compile=True)
def _layer_norm_fwd(parts, bias, gamma, beta, epsilon, out_dtype, barrier=False):
    xhat, _ = _normalize(parts, bias, epsilon)
    out = tf.cast(xhat * gamma + beta, out_dtype)
    return xla.optimization_barrier(out)[0] if barrier else out


@graph_function(jit_compile=True)
def _layer_norm_bwd(dy, parts, bias, gamma, epsilon, by_dot, low_dgamma, barrier, apart):
    if barrier:  # else CSE merges this recomputation with the forward's (layer_norm says why)
        parts = xla.optimization_barrier(*parts)
    xhat, rstd = _normalize(parts, bias, epsilon)
    dy = _f32(dy)
    g = dy * gamma
    dz = rstd * (g - tf.reduce_mean(g, -1, keepdims=True)
                 - xhat * tf.reduce_mean(g * xhat, -1, keepdims=True))
    low = parts[0].dtype
    dbias = None if bias is None else _column_sum(dz, by_dot, low, apart)
    return ([tf.cast(dz, p.dtype) for p in parts], dbias,
            _column_sum(dy * xhat, by_dot, low if low_dgamma else None, apart),
            _column_sum(dy, by_dot, low, apart))


def layer_norm(parts, gamma, beta, epsilon, out_dtype, bias=None):
    """LayerNorm(sum of `parts` + bias) over the last axis in float32, returned as `out_dtype`.

    `parts`: the input and optionally the residual added to it (same shape, any float dtypes);
    `bias`: optional float32 [width], the bias of the projection that produced the input.

    With the `ln_barrier` rewrite (an XLA step on a GPU) the output and the backward's inputs
    pass optimization barriers. Without them XLA, free to keep excess precision, feeds the next
    LayerNorm the float32 sum instead of this bfloat16 output, and CSE hands the backward the
    forward's float32 sum: each LayerNorm then writes a float32 tensor and is recomputed by its
    consumers, about three times the bytes of one pass in and out (docs/benchmarks.md).
    """
    # The backward is traced after the model's call: what it needs is read now.
    n, by_dot, low_dgamma = len(parts), _xla_gpu, rewritten("ln_low_dgamma")
    barrier, apart = rewritten("ln_barrier"), rewritten("colsum_apart")

    @tf.custom_gradient
    def fn(*args):
        parts, gamma, beta = args[:n], args[n], args[n + 1]
        bias = args[n + 2] if len(args) > n + 2 else None

        def grad(dy):
            dparts, dbias, dgamma, dbeta = _layer_norm_bwd(dy, parts, bias, gamma, epsilon,
                                                           by_dot, low_dgamma, barrier, apart)
            return (*dparts, dgamma, dbeta) + (() if bias is None else (dbias,))
        return _layer_norm_fwd(parts, bias, gamma, beta, epsilon, out_dtype, barrier), grad
    return fn(*parts, gamma, beta, *(() if bias is None else (bias,)))


# --- scaled, masked softmax --------------------------------------------------------------------

def softmax_reference(scores, bias, scale=1.0):
    return tf.cast(tf.nn.softmax(_f32(scores) * scale + bias), scores.dtype)


@graph_function(jit_compile=True)
def _softmax_fwd(scores, bias, scale):
    return tf.cast(tf.nn.softmax(_f32(scores) * scale + bias), scores.dtype)


@graph_function(jit_compile=True)
def _softmax_bwd(dp, scores, bias, scale):
    p = tf.nn.softmax(_f32(scores) * scale + bias)
    dp = _f32(dp)
    ds = p * (dp - tf.reduce_sum(dp * p, -1, keepdims=True)) * scale
    return tf.cast(ds, scores.dtype)


def masked_softmax(scores, bias, scale):
    """softmax(scores * scale + bias) in float32, returned in the dtype of `scores`.

    `bias` (float32, broadcast to `scores`) is the additive attention mask: no gradient.
    """

    @tf.custom_gradient
    def fn(scores):
        def grad(dp):
            return _softmax_bwd(dp, scores, bias, scale)
        return _softmax_fwd(scores, bias, scale), grad
    return fn(scores)
