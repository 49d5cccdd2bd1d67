"""ALBERT's optimizers (AdamW, LAMB) and its warmup + polynomial-decay learning rate.

The numbers follow the original TF1 code: decoupled weight decay added to the Adam direction,
LayerNorm and bias excluded, global-norm clipping at 1.0, and optionally its lack of bias
correction. Fine-tuning defaults to Adam's bias correction and a decay from the end of the
warmup (FINETUNING_UPDATE, measured in docs/finetuning.md); ORIGINAL_UPDATE is the original's.
TensorFlow backend only (the clipping hooks into Keras's tf.distribute gradient all-reduce).
"""

import math
import re

import keras
import tensorflow as tf

from albert_tf.tracing import graph_function

DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_NAMES = ("adamw", "lamb")
# The fine-tuning update of every task script, the Python task API and TaskModel.compile: the
# one that won bench/bench_finetune_stability.py (docs/finetuning.md). Without the correction the
# first updates are 3-6x Adam's, and runs at higher rates end at the majority class. ε: the
# original's 1e-6; transformers' 1e-8 scored the same on 8k-30k vocabularies and failed four
# of the suite's learning tests.
FINETUNING_UPDATE = dict(bias_correction=True, decay_after_warmup=True, epsilon=1e-6,
                         weight_decay_rate=0.01)
# The original's AdamWeightDecayOptimizer and schedule (--nobias_correction
# --nodecay_after_warmup).
ORIGINAL_UPDATE = dict(bias_correction=False, decay_after_warmup=False, epsilon=1e-6,
                       weight_decay_rate=0.01)


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0, then polynomial decay to `end_learning_rate` at `num_train_steps`.

    As in the original, the decay is computed from step 0, so the peak after warmup is below
    `init_lr`; `decay_after_warmup=True` starts it at the end of the warmup instead (from
    `init_lr`, as transformers' and Model Garden's schedules do). Unlike the original, steps
    before `start_warmup_step` get 0 instead of a negative rate.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0, end_learning_rate=0.0,
                 power=1.0, start_warmup_step=0, decay_after_warmup=False, name=None):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}.")
        if num_warmup_steps < 0 or start_warmup_step < 0:
            raise ValueError(
                "num_warmup_steps and start_warmup_step must be >= 0, got "
                f"num_warmup_steps={num_warmup_steps}, start_warmup_step={start_warmup_step}.")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)
        self.start_warmup_step = int(start_warmup_step)
        self.decay_after_warmup = bool(decay_after_warmup)
        self.name = name

    def __call__(self, step):
        with tf.name_scope(self.name or "WarmupPolynomialDecay"):
            step = tf.cast(step, tf.float32)
            start = (self.start_warmup_step + self.num_warmup_steps
                     if self.decay_after_warmup else 0)
            span = max(self.num_train_steps - start, 1)
            done = tf.clip_by_value((step - start) / span, 0.0, 1.0)
            decayed = ((self.init_lr - self.end_learning_rate) * (1.0 - done) ** self.power
                       + self.end_learning_rate)
            if not self.num_warmup_steps:
                return decayed
            warmup_step = tf.maximum(step - self.start_warmup_step, 0.0)
            warmup = self.init_lr * warmup_step / self.num_warmup_steps
            return tf.where(warmup_step < self.num_warmup_steps, warmup, decayed)

    def get_config(self):
        return {
            "init_lr": self.init_lr,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "start_warmup_step": self.start_warmup_step,
            "decay_after_warmup": self.decay_after_warmup,
            "name": self.name,
        }


class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A schedule times a variable: the learning rate that a loss-excursion recovery lowers
    (training.excursions), a checkpointed factor on the unchanged schedule."""

    def __init__(self, schedule, scale):
        self.schedule, self.scale = schedule, scale

    def __call__(self, step):
        return self.schedule(step) * tf.cast(self.scale, tf.float32)

    def get_config(self):
        raise NotImplementedError("a ScaledSchedule lives in a trainer, not in a saved model")


def scale_learning_rate(optimizer, scale):
    """Makes `optimizer`'s schedule (inside a loss-scale wrapper too) read `scale` (a variable)."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    schedule = optimizer._learning_rate
    if not isinstance(schedule, keras.optimizers.schedules.LearningRateSchedule):
        raise ValueError("a learning rate that recoveries lower must be a schedule")
    optimizer.learning_rate = ScaledSchedule(schedule, scale)


def _matches_any(name, patterns):
    return any(re.search(p, name) for p in patterns or ())


class _AdamBase(keras.optimizers.Optimizer):
    """Shared Adam moments, decoupled weight decay and post-all-reduce global-norm clipping."""

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, bias_correction=False,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY, name=None,
                 **kwargs):
        if kwargs.get("weight_decay") is not None:
            raise ValueError(
                f"{type(self).__name__} takes `weight_decay_rate` (the original's decoupled "
                f"decay), not Keras's `weight_decay`; got weight_decay={kwargs['weight_decay']}.")
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.bias_correction = bool(bias_correction)
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or [])

    def _excluded_from_adaptation(self):
        return None

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        # Decided once here: update_step only sees the bare tf.Variable, which has no Keras path.
        names = [getattr(v, "path", None) or v.name.split(":")[0] for v in var_list]
        self._decay = [self.weight_decay_rate > 0
                       and not _matches_any(n, self.exclude_from_weight_decay) for n in names]
        adapt_exclude = self._excluded_from_adaptation()
        self._adapt = [adapt_exclude is not None and not _matches_any(n, adapt_exclude)
                       for n in names]

    def update_step(self, gradient, variable, learning_rate):
        i = self._get_variable_index(variable)
        dtype = variable.dtype
        m, v, w = _adam_step(
            tf.cast(tf.convert_to_tensor(gradient), dtype), tf.convert_to_tensor(self._m[i]),
            tf.convert_to_tensor(self._v[i]), tf.convert_to_tensor(variable),
            tf.cast(learning_rate, dtype), tf.cast(self.iterations + 1, dtype),
            beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
            bias_correction=self.bias_correction,
            weight_decay_rate=self.weight_decay_rate if self._decay[i] else 0.0,
            adapt=self._adapt[i])
        self.assign(self._m[i], m)
        self.assign(self._v[i], v)
        self.assign(variable, w)

    def _clip_gradients(self, grads):
        if self.global_clipnorm:
            return grads  # Done after the cross-replica sum, in _all_reduce_sum_gradients.
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Keras would clip each replica's share before this sum; the original clips the
        # global gradient, so one device and N replicas take the same step.
        pairs = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if not self.global_clipnorm:
            return pairs
        grads = [None if g is None else tf.convert_to_tensor(g) for g, _ in pairs]
        grads, _ = tf.clip_by_global_norm(grads, self.global_clipnorm)
        return [(g, v) for g, (_, v) in zip(grads, pairs)]

    def get_config(self):
        config = super().get_config()
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "bias_correction": self.bias_correction,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
        })
        return config


@graph_function(jit_compile=True)  # one fused pass over the variable instead of ~12 ops
def _adam_step(g, m, v, w, lr, t, beta_1, beta_2, epsilon, bias_correction, weight_decay_rate,
               adapt):
    """New (m, v, w): the Adam direction, + decoupled decay, × LAMB's trust ratio if `adapt`."""
    m = beta_1 * m + (1.0 - beta_1) * g
    v = beta_2 * v + (1.0 - beta_2) * tf.square(g)
    m_hat, v_hat = m, v
    if bias_correction:
        m_hat = m / (1.0 - tf.pow(beta_1, t))
        v_hat = v / (1.0 - tf.pow(beta_2, t))
    update = m_hat / (tf.sqrt(v_hat) + epsilon)
    if weight_decay_rate:
        update += weight_decay_rate * w
    if adapt:
        update *= _trust_ratio(w, update)
    return m, v, w - lr * update


def _trust_ratio(weight, update):
    """‖w‖/‖update‖, or 1 when either norm is 0 (the original LAMB's layer adaptation)."""
    w_norm = tf.norm(weight)
    u_norm = tf.norm(update)
    return tf.where((w_norm > 0) & (u_norm > 0), tf.math.divide_no_nan(w_norm, u_norm),
                    tf.ones_like(w_norm))


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_AdamBase):
    """The original's AdamWeightDecayOptimizer: w -= lr * (m / (sqrt(v) + eps) + wd * w)."""


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(_AdamBase):
    """The original's LAMB: the AdamW update scaled per variable by ‖w‖/‖update‖.

    `exclude_from_layer_adaptation` defaults to `exclude_from_weight_decay`.
    """

    def __init__(self, learning_rate=0.001, exclude_from_layer_adaptation=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.exclude_from_layer_adaptation = (
            None if exclude_from_layer_adaptation is None else list(exclude_from_layer_adaptation))

    def _excluded_from_adaptation(self):
        if self.exclude_from_layer_adaptation is None:
            return self.exclude_from_weight_decay
        return self.exclude_from_layer_adaptation

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = self.exclude_from_layer_adaptation
        return config


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="lamb",
                     poly_power=1.0, start_warmup_step=0, weight_decay_rate=0.01, clip_norm=1.0,
                     end_learning_rate=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                     bias_correction=False, decay_after_warmup=False,
                     exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                     exclude_from_layer_adaptation=None):
    """The original's create_optimizer: schedule + AdamW or LAMB, global-norm clipping at 1.0.

    `clip_norm=None` or 0 turns clipping off.
    """
    if not (math.isfinite(init_lr) and init_lr > 0):
        raise ValueError(f"--learning_rate={init_lr} must be a positive number")
    if num_train_steps < 1:
        raise ValueError(f"the number of training steps ({num_train_steps}) must be at least 1")
    if not 0 <= num_warmup_steps <= num_train_steps:
        raise ValueError(f"the warmup ({num_warmup_steps} steps) must be between 0 and the "
                         f"number of training steps ({num_train_steps})")
    name = str(optimizer).lower()
    if name not in OPTIMIZER_NAMES:
        raise ValueError(f"Unknown optimizer {optimizer!r}; valid names are "
                         f"{', '.join(repr(n) for n in OPTIMIZER_NAMES)}.")
    schedule = WarmupPolynomialDecay(
        init_lr, num_train_steps, num_warmup_steps, end_learning_rate=end_learning_rate,
        power=poly_power, start_warmup_step=start_warmup_step,
        decay_after_warmup=decay_after_warmup)
    common = dict(learning_rate=schedule, weight_decay_rate=weight_decay_rate, beta_1=beta_1,
                  beta_2=beta_2, epsilon=epsilon, bias_correction=bias_correction,
                  exclude_from_weight_decay=exclude_from_weight_decay,
                  global_clipnorm=clip_norm or None)
    if name == "lamb":
        return Lamb(exclude_from_layer_adaptation=exclude_from_layer_adaptation, **common)
    return AdamWeightDecay(**common)


def finetuning_optimizer(learning_rate=5e-5, num_train_steps=None, num_warmup_steps=0,
                         optimizer="adamw", **overrides):
    """The fine-tuning default (FINETUNING_UPDATE; `overrides` change any of create_optimizer's
    arguments): warmup then linear decay over `num_train_steps`, or without them a constant
    `learning_rate` (Keras's `fit`, where the number of steps is not known here)."""
    settings = {**FINETUNING_UPDATE, **overrides}
    if num_train_steps is not None:
        return create_optimizer(learning_rate, num_train_steps, num_warmup_steps, optimizer,
                                **settings)
    if num_warmup_steps:
        raise ValueError("num_warmup_steps needs num_train_steps")
    settings.pop("decay_after_warmup")
    clip_norm = settings.pop("clip_norm", 1.0)
    return AdamWeightDecay(learning_rate, global_clipnorm=clip_norm or None, **settings)


def describe_update(optimizer, learning_rate, settings):
    """A fine-tuning update in words (`settings`: finetuning_optimizer's, FINETUNING_UPDATE's
    keys), as a run logs it before training."""
    return (f"{optimizer} at learning rate {learning_rate:g}, "
            f"{'' if settings['bias_correction'] else 'no '}bias correction, decay from "
            f"{'the end of the warmup' if settings['decay_after_warmup'] else 'step 0'}, "
            f"epsilon {settings['epsilon']:g}, weight decay {settings['weight_decay_rate']:g}")


class ReplicaLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras's dynamic loss scaling, with the finiteness check all-reduced over the replicas.

    Keras reads each replica's own gradients before they are summed and, under
    MirroredStrategy, decides by replica 0 alone: an inf on another replica was applied (and
    summed into every weight) while the scale stayed. Here a non-finite gradient on any replica
    skips the step on every replica and halves the scale.
    """

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return finite
        bad = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                 tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(bad, 0.0)


def current_loss_scale(optimizer):
    """float16's dynamic loss scale, or None for an optimizer without one."""
    if not isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return None
    if not optimizer.built:  # (its scale variable is made with the first update)
        return float(optimizer.initial_scale)
    return float(optimizer.dynamic_scale.numpy())


def current_learning_rate(optimizer):
    """The learning rate at the optimizer's step (inside a loss-scale wrapper too)."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    lr = optimizer._learning_rate
    value = lr(optimizer.iterations) if callable(lr) else lr
    return float(tf.convert_to_tensor(value).numpy())
