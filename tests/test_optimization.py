"""Tests for albert_tf.optimization against a numpy transcription of the original formulas."""

import copy
import json
import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.modeling.optimizers import (AdamWeightDecay, Lamb, WarmupPolynomialDecay,
                                    create_optimizer)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def original_lr(step, init_lr, num_train_steps, num_warmup_steps, power=1.0, start_warmup_step=0,
                end_lr=0.0):
    """The original schedule, negative rates before start_warmup_step included."""
    done = min(step, num_train_steps) / num_train_steps
    lr = (init_lr - end_lr) * (1.0 - done) ** power + end_lr
    s = step - start_warmup_step
    if num_warmup_steps and s < num_warmup_steps:
        lr = init_lr * s / num_warmup_steps
    return lr


def reference_run(names, params, grad_steps, lr_fn, lamb, clip=1.0, wd=0.01, b1=0.9, b2=0.999,
                  eps=1e-6, bias_correction=False, exclude=EXCLUDE, exclude_adapt=None):
    """The original AdamW / LAMB in float64 numpy; returns the parameters after all steps."""
    exclude_adapt = exclude if exclude_adapt is None else exclude_adapt
    w = [np.asarray(p, np.float64).copy() for p in params]
    m = [np.zeros_like(p) for p in w]
    v = [np.zeros_like(p) for p in w]
    for t, grads in enumerate(grad_steps):
        grads = [np.asarray(g, np.float64) for g in grads]
        if clip:
            norm = np.sqrt(sum(np.sum(g * g) for g in grads))
            grads = [g * clip / max(norm, clip) for g in grads]
        lr = lr_fn(t)
        for i, (name, g) in enumerate(zip(names, grads)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mh, vh = m[i], v[i]
            if bias_correction:
                mh, vh = mh / (1 - b1 ** (t + 1)), vh / (1 - b2 ** (t + 1))
            update = mh / (np.sqrt(vh) + eps)
            if wd and not any(re.search(p, name) for p in exclude):
                update = update + wd * w[i]
            if lamb and not any(re.search(p, name) for p in exclude_adapt):
                w_norm, u_norm = np.linalg.norm(w[i]), np.linalg.norm(update)
                update = update * (w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0)
            w[i] = w[i] - lr * update
    return w


def make_variables(seed=0, zero_kernel=False):
    """A kernel, a LayerNorm gamma and a bias, with paths like the encoder's."""
    rng = np.random.default_rng(seed)
    kernel = np.zeros((3, 4)) if zero_kernel else rng.normal(size=(3, 4))
    values = [kernel, 1.0 + 0.1 * rng.normal(size=(4,)), 0.1 * rng.normal(size=(4,))]
    with keras.name_scope("albert_encoder"):
        with keras.name_scope("attention"):
            kernel = keras.Variable(values[0].astype("float32"), name="kernel")
        with keras.name_scope("LayerNorm"):
            gamma = keras.Variable(values[1].astype("float32"), name="gamma")
        with keras.name_scope("attention"):
            bias = keras.Variable(values[2].astype("float32"), name="bias")
    return [kernel, gamma, bias]


def make_grads(seed=1, scales=(0.3, 5.0, 0.5, 20.0, 2.0)):
    """Gradient sets whose global norms fall both under and over the clip norm of 1."""
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (4,), (4,)]
    steps = []
    for scale in scales:
        gs = [rng.normal(size=s) for s in shapes]
        norm = np.sqrt(sum(np.sum(g * g) for g in gs))
        steps.append([(g * scale / norm).astype("float32") for g in gs])
    return steps


def run(optimizer, variables, grad_steps):
    for grads in grad_steps:
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
    return [v.numpy() for v in variables]


@pytest.mark.parametrize("name", ["adamw", "lamb"])
@pytest.mark.parametrize("bias_correction", [False, True])
def test_matches_numpy_reference(name, bias_correction):
    variables = make_variables()
    names = [v.path for v in variables]
    assert names == ["albert_encoder/attention/kernel", "albert_encoder/LayerNorm/gamma",
                     "albert_encoder/attention/bias"]
    start = [v.numpy() for v in variables]
    grads = make_grads()
    opt = create_optimizer(0.05, num_train_steps=10, num_warmup_steps=2, optimizer=name,
                           bias_correction=bias_correction)
    got = run(opt, variables, grads)
    want = reference_run(names, start, grads, lambda t: original_lr(t, 0.05, 10, 2),
                         lamb=name == "lamb", bias_correction=bias_correction)
    for g, w, s in zip(got, want, start):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
        assert np.abs(g - s).max() > 1e-3  # every variable actually moved


def test_weight_decay_exclusion_matters():
    grads = make_grads()[:3]
    default = run(AdamWeightDecay(0.05), make_variables(), grads)
    decay_all = run(AdamWeightDecay(0.05, exclude_from_weight_decay=[]), make_variables(), grads)
    np.testing.assert_array_equal(default[0], decay_all[0])  # the kernel decays in both
    assert np.abs(default[1] - decay_all[1]).max() > 1e-4  # LayerNorm gamma
    assert np.abs(default[2] - decay_all[2]).max() > 1e-5  # bias
    no_decay = run(AdamWeightDecay(0.05, weight_decay_rate=0.0), make_variables(), grads)
    np.testing.assert_array_equal(default[2], no_decay[2])
    assert np.abs(default[0] - no_decay[0]).max() > 1e-4


def test_lamb_trust_ratio_is_norm_ratio_and_skips_excluded():
    (grad,) = make_grads(scales=(0.7,))[:1]
    w0 = [v.numpy().astype(np.float64) for v in make_variables()]
    adamw = run(AdamWeightDecay(0.1, global_clipnorm=None), make_variables(), [grad])
    lamb = run(Lamb(0.1, global_clipnorm=None), make_variables(), [grad])
    # One step: m = 0.1 g, v = 0.001 g^2, so the Adam direction is known in closed form.
    g = grad[0].astype(np.float64)
    update = 0.1 * g / (np.sqrt(0.001 * g * g) + 1e-6) + 0.01 * w0[0]
    ratio = np.linalg.norm(w0[0]) / np.linalg.norm(update)
    assert abs(ratio - 1.0) > 0.3
    np.testing.assert_allclose(w0[0] - lamb[0], ratio * (w0[0] - adamw[0]), atol=1e-6)
    np.testing.assert_array_equal(lamb[1], adamw[1])  # LayerNorm: ratio 1
    np.testing.assert_array_equal(lamb[2], adamw[2])  # bias: ratio 1
    adapt_all = run(Lamb(0.1, global_clipnorm=None, exclude_from_layer_adaptation=[]),
                    make_variables(), [grad])
    assert np.abs(adapt_all[1] - lamb[1]).max() > 1e-3
    assert np.abs(adapt_all[2] - lamb[2]).max() > 1e-3


def test_lamb_trust_ratio_is_one_for_zero_weights():
    grads = make_grads(scales=(0.7,))
    adamw = run(AdamWeightDecay(0.1), make_variables(zero_kernel=True), grads)
    lamb = run(Lamb(0.1), make_variables(zero_kernel=True), grads)
    np.testing.assert_array_equal(lamb[0], adamw[0])
    assert np.abs(lamb[0]).max() > 1e-2


def test_global_norm_clipping():
    small, huge = make_grads(scales=(0.5, 1e4))
    clipped_by_hand = [g / 1e4 for g in huge]
    clipped = run(Lamb(0.05, global_clipnorm=1.0), make_variables(), [small, huge])
    by_hand = run(Lamb(0.05, global_clipnorm=None), make_variables(), [small, clipped_by_hand])
    unclipped = run(Lamb(0.05, global_clipnorm=None), make_variables(), [small, huge])
    for a, b in zip(clipped, by_hand):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert max(np.abs(a - b).max() for a, b in zip(clipped, unclipped)) > 1e-3


def test_sparse_gradients_equal_their_dense_sum():
    rng = np.random.default_rng(4)
    table = rng.normal(size=(5, 3)).astype("float32")
    rows = rng.normal(size=(3, 3)).astype("float32") * 2.0
    indices = tf.constant([1, 3, 1])  # a repeated row sums, as in an embedding lookup
    dense = tf.math.unsorted_segment_sum(rows, indices, 5)
    results = []
    for grad in (tf.IndexedSlices(tf.constant(rows), indices, tf.constant([5, 3])), dense):
        for clip in (1.0, None):
            with keras.name_scope("embeddings"):
                var = keras.Variable(table, name="word_embeddings")
            opt = Lamb(0.05, global_clipnorm=clip)
            opt.apply_gradients([(tf.fill((5, 3), 0.01), var)])  # so that step 2's scale counts
            opt.apply_gradients([(grad, var)])
            results.append(var.numpy())
    np.testing.assert_allclose(results[0], results[2], atol=1e-6)
    np.testing.assert_allclose(results[1], results[3], atol=1e-6)
    assert np.abs(results[0] - results[1]).max() > 1e-3  # clipping was active


def test_schedule_values_match_original_and_never_go_negative():
    sched = WarmupPolynomialDecay(1e-3, num_train_steps=1000, num_warmup_steps=100)
    expected = {0: 0.0, 50: 5e-4, 99: 9.9e-4, 100: 9e-4, 550: 4.5e-4, 1000: 0.0, 2000: 0.0}
    for step, lr in expected.items():
        assert float(sched(step)) == pytest.approx(lr, abs=1e-9), step
        assert lr == pytest.approx(original_lr(step, 1e-3, 1000, 100), abs=1e-12)

    late = WarmupPolynomialDecay(1e-3, 1000, 100, power=2.0, start_warmup_step=200,
                                 end_learning_rate=1e-5)
    assert original_lr(50, 1e-3, 1000, 100, 2.0, 200, 1e-5) == pytest.approx(-1.5e-3)
    expected = {0: 0.0, 50: 0.0, 200: 0.0, 250: 5e-4, 300: 0.99e-3 * 0.7 ** 2 + 1e-5,
                500: 0.99e-3 * 0.25 + 1e-5, 1000: 1e-5, 5000: 1e-5}
    for step, lr in expected.items():
        assert float(late(step)) == pytest.approx(lr, abs=1e-9), step
        if step >= 200:
            assert lr == pytest.approx(original_lr(step, 1e-3, 1000, 100, 2.0, 200, 1e-5))

    no_warmup = WarmupPolynomialDecay(2e-3, 100)
    assert float(no_warmup(0)) == pytest.approx(2e-3)
    assert float(no_warmup(tf.constant(25, tf.int64))) == pytest.approx(1.5e-3)


def test_schedule_decays_after_warmup_when_asked():
    """decay_after_warmup: the peak --learning_rate at the end of the warmup, then a straight
    line to 0 at the last step (transformers' linear schedule); the original's line starts at
    step 0."""
    sched = WarmupPolynomialDecay(1e-3, 1000, 100, decay_after_warmup=True)
    expected = {0: 0.0, 50: 5e-4, 100: 1e-3, 550: 5e-4, 910: 1e-4, 1000: 0.0, 2000: 0.0}
    for step, lr in expected.items():
        assert float(sched(step)) == pytest.approx(lr, abs=1e-9), step
    assert float(WarmupPolynomialDecay(1e-3, 1000, 100)(100)) == pytest.approx(9e-4)
    late = WarmupPolynomialDecay(1e-3, 1000, 100, start_warmup_step=200, power=2.0,
                                 end_learning_rate=1e-5, decay_after_warmup=True)
    assert float(late(300)) == pytest.approx(1e-3)
    assert float(late(650)) == pytest.approx(0.99e-3 * 0.5 ** 2 + 1e-5)
    assert float(late(1000)) == pytest.approx(1e-5)
    assert WarmupPolynomialDecay.from_config(sched.get_config()).decay_after_warmup


@pytest.mark.parametrize("bias_correction", [False, True])
def test_first_step_by_hand(bias_correction):
    """Step 1 from zero moments, in closed form: m = 0.1 g and v = 0.001 g², so the original
    update is lr·0.1g/(√0.001|g| + ε) ≈ 3.16·lr·sign(g), Adam's with the correction
    lr·g/(|g| + ε) ≈ lr·sign(g): the original's first steps are about 3x as large."""
    g = np.array([[0.5, -2e-3], [1e-7, -0.3]], np.float32)
    w0 = np.array([[0.2, -0.1], [0.05, 0.3]], np.float32)
    w = keras.Variable(w0, name="kernel")
    opt = AdamWeightDecay(0.01, weight_decay_rate=0.0, bias_correction=bias_correction,
                          global_clipnorm=None)
    opt.apply_gradients([(tf.constant(g), w)])
    g64 = g.astype(np.float64)
    if bias_correction:
        step = g64 / (np.abs(g64) + 1e-6)
    else:
        step = 0.1 * g64 / (np.sqrt(0.001) * np.abs(g64) + 1e-6)
    np.testing.assert_allclose(w.numpy(), w0 - 0.01 * step, rtol=0, atol=1e-7)
    moved = np.abs(w.numpy() - w0)[0, 0] / 0.01
    assert moved == pytest.approx(1 / np.sqrt(0.001) * 0.1 if not bias_correction else 1.0,
                                  rel=1e-4)


def test_schedule_rejects_bad_steps():
    with pytest.raises(ValueError, match="num_train_steps must be positive"):
        WarmupPolynomialDecay(1e-3, 0)
    with pytest.raises(ValueError, match="start_warmup_step"):
        WarmupPolynomialDecay(1e-3, 10, 2, start_warmup_step=-1)


def test_create_optimizer_defaults_and_errors():
    opt = create_optimizer(1e-3, 100, 10)
    assert isinstance(opt, Lamb)
    assert (opt.global_clipnorm, opt.weight_decay_rate, opt.epsilon, opt.beta_1, opt.beta_2,
            opt.bias_correction) == (1.0, 0.01, 1e-6, 0.9, 0.999, False)
    assert opt.exclude_from_weight_decay == ["LayerNorm", "layer_norm", "bias"]
    adamw = create_optimizer(1e-3, 100, 10, optimizer="AdamW", clip_norm=None)
    assert type(adamw) is AdamWeightDecay and adamw.global_clipnorm is None
    assert float(adamw.learning_rate) == 0.0  # warmup starts at 0
    with pytest.raises(ValueError, match=r"Unknown optimizer 'sgd'.*'adamw', 'lamb'"):
        create_optimizer(1e-3, 100, 10, optimizer="sgd")
    with pytest.raises(ValueError, match="weight_decay_rate"):
        AdamWeightDecay(1e-3, weight_decay=0.1)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_config_round_trip(name):
    opt = create_optimizer(3e-4, 500, 50, optimizer=name, poly_power=0.5, start_warmup_step=5,
                           weight_decay_rate=0.02, clip_norm=2.0, bias_correction=True,
                           exclude_from_weight_decay=["bias"])
    config = opt.get_config()
    again = type(opt).from_config(copy.deepcopy(config))  # Keras mutates it in place
    assert again.get_config() == config
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(restored) is type(opt) and restored.get_config() == config
    schedule = keras.optimizers.schedules.deserialize(config["learning_rate"])
    assert isinstance(schedule, WarmupPolynomialDecay)
    for step in (0, 30, 55, 400, 600):
        assert float(schedule(step)) == pytest.approx(
            original_lr(max(step, 5), 3e-4, 500, 50, 0.5, 5), rel=1e-6, abs=1e-12)
    grads = make_grads()[:2]
    np.testing.assert_array_equal(run(opt, make_variables(), grads)[0],
                                  run(restored, make_variables(), grads)[0])


def _tiny_model(dtype=None):
    inputs = keras.Input((3,))
    x = keras.layers.Dense(4, name="dense", dtype=dtype)(inputs)
    x = keras.layers.LayerNormalization(name="LayerNorm", dtype=dtype)(x)
    outputs = keras.layers.Dense(1, name="out", dtype=dtype)(x)
    return keras.Model(inputs, outputs)


def test_compile_and_fit():
    keras.utils.set_random_seed(0)
    model = _tiny_model()
    model.compile(optimizer=create_optimizer(1e-2, 10, 2, optimizer="lamb"), loss="mse")
    before = [w.numpy() for w in model.trainable_weights]
    x, y = np.random.default_rng(0).normal(size=(16, 3)), np.ones((16, 1))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert int(model.optimizer.iterations) == 4
    assert all(np.abs(a - b.numpy()).max() > 0 for a, b in zip(before, model.trainable_weights))


def test_loss_scale_optimizer_wrap_and_float32_moments():
    keras.utils.set_random_seed(0)
    model = _tiny_model(dtype="mixed_float16")
    variables = model.trainable_variables
    assert all(v.dtype == "float32" for v in variables)
    shapes = [tuple(v.shape) for v in variables]
    rng = np.random.default_rng(2)
    grad_steps = [[rng.normal(size=s).astype("float32") * c for s in shapes] for c in (0.1, 2.0)]
    start = [v.numpy() for v in variables]

    wrapped = keras.optimizers.LossScaleOptimizer(create_optimizer(1e-2, 10, 0), initial_scale=256.0)
    for step in grad_steps:
        wrapped.apply_gradients(zip([tf.constant(g * 256.0) for g in step], variables))
    got = [v.numpy() for v in variables]
    inner = wrapped.inner_optimizer
    assert all(v.dtype == "float32" for v in inner.variables if "adam_" in v.path)
    assert int(inner.iterations) == 2

    for v, s in zip(variables, start):
        v.assign(s)
    plain = run(create_optimizer(1e-2, 10, 0), variables, grad_steps)
    for a, b in zip(got, plain):
        np.testing.assert_allclose(a, b, atol=1e-6)

    # A non-finite gradient skips the step and halves the scale.
    bad = [tf.fill(v.shape, np.inf) for v in variables]
    wrapped.apply_gradients(zip(bad, variables))
    assert float(wrapped.dynamic_scale) == 128.0 and int(inner.iterations) == 2

    model.compile(optimizer=keras.optimizers.LossScaleOptimizer(create_optimizer(1e-2, 10, 0)),
                  loss="mse")
    model.fit(np.ones((8, 3)), np.ones((8, 1)), batch_size=4, verbose=0)
    assert int(model.optimizer.iterations) == 2


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from tests.test_optimization import make_variables, make_grads
    from albert_tf.modeling.optimizers import create_optimizer

    def train(strategy, name, parts):
        with strategy.scope():
            variables = make_variables()
            opt = create_optimizer(0.05, 10, 2, optimizer=name)
            opt.build(variables)  # slots made inside the first traced step fail to initialise

        @tf.function
        def step(a, b):
            def replica_fn():
                first = tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0)
                # Replica 0 holds share a, replica 1 share b; they sum to the global gradient.
                grads = [tf.where(first, x, y) for x, y in zip(a, b)] if parts == 2 else a
                opt.apply_gradients(zip(grads, variables))
            strategy.run(replica_fn)

        rng = np.random.default_rng(3)
        for grads in make_grads():
            # Shares that are not parallel to their sum, so clipping each share would be wrong;
            # one device gets their float32 sum, as the all-reduce computes it.
            a = [g + rng.normal(size=g.shape).astype("float32") for g in grads]
            b = [g - x for g, x in zip(grads, a)]
            if parts == 2:
                a, b = [tf.constant(x) for x in a], [tf.constant(x) for x in b]
            else:
                a, b = [tf.constant(x + y) for x, y in zip(a, b)], None
            step(a, b)
        return [v.numpy() for v in variables], int(opt.iterations.numpy())

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    out = {"replicas": mirrored.num_replicas_in_sync}
    for name in ("adamw", "lamb"):
        one, _ = train(tf.distribute.get_strategy(), name, 1)
        two, steps = train(mirrored, name, 2)
        out[name] = max(float(np.abs(a - b).max()) for a, b in zip(one, two))
        out[name + "_steps"] = steps

    with mirrored.scope():
        inputs = keras.Input((3,))
        model = keras.Model(inputs, keras.layers.Dense(1, name="dense")(inputs))
        model.compile(optimizer=create_optimizer(1e-2, 10, 0), loss="mse")
    before = model.get_weights()
    model.fit(np.ones((8, 3)), np.zeros((8, 1)), batch_size=4, verbose=0)
    out["fit_moved"] = all(float(np.abs(a - b).max()) > 0
                           for a, b in zip(before, model.get_weights()))
    print("RESULT" + json.dumps(out))
""")


def test_mirrored_two_replicas_match_one_device():
    # A fresh process: logical devices must be configured before TensorFlow initialises.
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, "-c", MIRRORED_SCRIPT, REPO], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT"):])
    assert out["replicas"] == 2
    assert out["adamw"] < 1e-6 and out["lamb"] < 1e-6, out
    assert out["adamw_steps"] == out["lamb_steps"] == 5
    assert out["fit_moved"]


def test_finetuning_default_is_the_same_everywhere():
    """The scripts' flags, the Python task API, finetuning_optimizer and compile() without an
    optimizer all take FINETUNING_UPDATE; ORIGINAL_UPDATE is the original's."""
    from absl import flags

    from albert_tf import (AlbertClassifier, AlbertConfig, finetuning_optimizer, run_classifier,
                           run_ner, run_race, run_squad)
    from albert_tf.tasks import finetuning_options
    from albert_tf.modeling.optimizers import (FINETUNING_UPDATE, ORIGINAL_UPDATE,
                                               describe_update)
    from conftest import TINY
    from tool_runner import own_flags

    assert FINETUNING_UPDATE == dict(bias_correction=True, decay_after_warmup=True,
                                     epsilon=1e-6, weight_decay_rate=0.01)
    assert ORIGINAL_UPDATE == dict(FINETUNING_UPDATE, bias_correction=False,
                                   decay_after_warmup=False)
    assert describe_update("adamw", 1e-3, FINETUNING_UPDATE) == (
        "adamw at learning rate 0.001, bias correction, decay from the end of the warmup, "
        "epsilon 1e-06, weight decay 0.01")
    from albert_tf.tasks.flags import UPDATE_FLAGS as names
    for module in (run_classifier, run_squad, run_race, run_ner):
        with own_flags():
            module.define_flags()
            assert {k: flags.FLAGS[f].default for k, f in names.items()} == FINETUNING_UPDATE
    options = finetuning_options()
    assert {k: getattr(options, f) for k, f in names.items()} == FINETUNING_UPDATE

    opt = finetuning_optimizer(1e-3, 100, 10)
    assert type(opt) is AdamWeightDecay and opt.bias_correction and opt.global_clipnorm == 1.0
    assert opt.epsilon == 1e-6
    assert float(opt.learning_rate) == 0.0 and opt._learning_rate.decay_after_warmup
    original = finetuning_optimizer(1e-3, 100, 10, **ORIGINAL_UPDATE)
    assert not original.bias_correction and not original._learning_rate.decay_after_warmup
    assert original.epsilon == 1e-6

    model = AlbertClassifier(AlbertConfig(**TINY), 2)
    model.compile()
    assert type(model.optimizer) is AdamWeightDecay and model.optimizer.bias_correction
    assert float(model.optimizer.learning_rate) == pytest.approx(5e-5)
    assert model.optimizer.weight_decay_rate == 0.01 and model.optimizer.global_clipnorm == 1.0
    assert model.optimizer.epsilon == 1e-6
    with pytest.raises(ValueError, match="num_warmup_steps needs num_train_steps"):
        finetuning_optimizer(1e-3, num_warmup_steps=10)
