"""The one place that picks how a script runs: tf.distribute strategy, mixed-precision policy,
XLA compilation and the step's kernels, from the values of the flags every training script
shares."""

import functools
import json
import os
import subprocess
import sys

import keras
import tensorflow as tf
from absl import flags, logging

from albert_tf.modeling.attention import MIN_FUSED_SEQ, MODES, fused_reason
from albert_tf.modeling.attention import resolve as resolve_attention
from albert_tf.modeling.step_kernels import StepKernels, traced_with
from albert_tf.training.step_memory import StepMemory, gpu_memory_bytes, step_bytes

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker_mirrored", "tpu")
PRECISIONS = ("auto", "none", "bfloat16", "float16")
# Keras's policy names, which the log prints, taken for ours.
PRECISION_ALIASES = {"float32": "none", "mixed_bfloat16": "bfloat16",
                     "mixed_float16": "float16"}
JIT_CHOICES = ("auto", "true", "false")
# The flags define_flags defines, setup's arguments.
FLAG_NAMES = ("strategy", "use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master",
              "mixed_precision", "jit_compile", "attention")


def define_flags(flag_values=None):
    """The distribution and precision flags shared by every training script."""
    fv = flags.FLAGS if flag_values is None else flag_values
    flags.DEFINE_enum("strategy", "auto", STRATEGIES,
                      "tf.distribute strategy; auto: tpu with --use_tpu, multi_worker_mirrored "
                      "when TF_CONFIG names several workers, mirrored with several GPUs, else "
                      "one_device.", flag_values=fv)
    flags.DEFINE_bool("use_tpu", False, "Train on a TPU (same as --strategy=tpu).",
                      flag_values=fv)
    flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.", flag_values=fv)
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.", flag_values=fv)
    flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.", flag_values=fv)
    flags.DEFINE_string("master", None, "TensorFlow master address (TPU).", flag_values=fv)
    flags.DEFINE_flag(flags.Flag(
        _PrecisionParser(list(PRECISIONS)), flags.ArgumentSerializer(), "mixed_precision", "auto",
        f"<{'|'.join(PRECISIONS)}>: Compute precision; auto: bfloat16 on TPU, on GPUs with "
        "bf16 support and on CPUs with AVX512-BF16/AMX, float16 on older GPUs, else none "
        "(Keras's names float32, mixed_bfloat16 and mixed_float16 are taken too)."),
        flag_values=fv)
    # A boolean-style flag (--jit_compile, --nojit_compile) that also takes `auto`.
    flags.DEFINE_flag(flags.Flag(
        flags.EnumParser(list(JIT_CHOICES), case_sensitive=False), flags.ArgumentSerializer(),
        "jit_compile", "auto",
        "Compile the training step with XLA: auto (on GPU and TPU; off on CPU, where XLA was "
        "slower than oneDNN), true or false.", boolean=True), flag_values=fv)
    flags.DEFINE_enum("attention", "auto", MODES,
                      "Attention in training steps: fused (cuDNN flash attention, needs XLA on "
                      "a GPU and bfloat16/float16), plain, or auto: fused in an XLA step on a "
                      f"GPU from sequence length {MIN_FUSED_SEQ} without attention "
                      "dropout, else plain.", flag_values=fv)


class _PrecisionParser(flags.EnumParser):
    def parse(self, argument):
        return super().parse(PRECISION_ALIASES.get(argument, argument))


# How long a worker waits for the others TF_CONFIG lists before it stops (TensorFlow waits on),
# saying whom it waits for every WORKER_WAIT_LOG_SECONDS.
WORKER_WAIT_SECONDS, WORKER_WAIT_LOG_SECONDS = 900, 30


def _tf_config():
    """TF_CONFIG's JSON ({} without it), checked: its task is one of its cluster's."""
    text = os.environ.get("TF_CONFIG", "")
    try:
        config = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise ValueError(f"TF_CONFIG is not JSON ({e}): {text[:120]}") from None
    cluster, task = config.get("cluster") or {}, config.get("task")
    if cluster and not (isinstance(task, dict) and "type" in task and "index" in task):
        raise ValueError("TF_CONFIG names no task: give each worker its own "
                         "\"task\": {\"type\": \"worker\", \"index\": i}")
    if cluster:
        members = cluster.get(task["type"]) or []
        if not isinstance(task["index"], int) or not 0 <= task["index"] < len(members):
            raise ValueError(f"TF_CONFIG's task is {task['type']} {task['index']!r}, but its "
                             f"cluster lists {len(members)} {task['type']}(s) (indexes 0 to "
                             f"{len(members) - 1})")
    return config


def _num_workers_in_tf_config():
    cluster = _tf_config().get("cluster", {})
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def _multi_worker_strategy():
    """MultiWorkerMirroredStrategy, its start watched (`worker_wait`): TensorFlow waits without
    end, deaf to signals, for a worker that was not started."""
    config = _tf_config()
    if _num_workers_in_tf_config() < 2:
        logging.warning("--strategy=multi_worker_mirrored without a TF_CONFIG that lists several "
                        "workers: this process trains alone (1 replica)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    task = config["task"]
    others = "; ".join(f"{kind} {i} at {address}"
                       for kind, addresses in config["cluster"].items()
                       for i, address in enumerate(addresses)
                       if (kind, i) != (task["type"], task["index"]))
    watch = subprocess.Popen(
        [sys.executable, "-m", "albert_tf.training.worker_wait", str(os.getpid()),
         str(WORKER_WAIT_SECONDS), str(WORKER_WAIT_LOG_SECONDS), others], stdin=subprocess.PIPE)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy()
    except tf.errors.UnknownError as e:
        address = config["cluster"][task["type"]][task["index"]]
        raise ValueError(f"TF_CONFIG: {task['type']} {task['index']} could not serve at "
                         f"{address} ({e.message.splitlines()[0][:160]}): is the port in "
                         f"use, by another run?") from None
    finally:
        watch.stdin.close()
        watch.wait()


def get_strategy(strategy="auto", use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
                 master=None):
    """Builds the tf.distribute strategy named by the flags."""
    if strategy not in STRATEGIES:
        raise ValueError(f"--strategy={strategy!r}: use one of {', '.join(STRATEGIES)}")
    if strategy == "auto":
        if use_tpu:
            strategy = "tpu"
        elif _num_workers_in_tf_config() > 1:
            strategy = "multi_worker_mirrored"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            strategy = "mirrored"
        else:
            strategy = "one_device"
    if strategy == "tpu":
        result = tf.distribute.TPUStrategy(_tpu_resolver(tpu_name or master, tpu_zone,
                                                         gcp_project))
    elif strategy == "multi_worker_mirrored":
        result = _multi_worker_strategy()
    elif strategy == "mirrored":
        result = tf.distribute.MirroredStrategy()
        if result.num_replicas_in_sync == 1:
            logging.warning("--strategy=mirrored found one device (%s): it trains as "
                            "one_device would", result.extended.worker_devices[0])
    else:
        gpus = tf.config.list_logical_devices("GPU")
        result = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    logging.info("Strategy %s (%s) with %d replicas", strategy, type(result).__name__,
                 result.num_replicas_in_sync)
    return result


def _tpu_resolver(tpu, zone, project):
    """The TPU's cluster resolver, connected and initialized; a TPU that cannot be reached is
    one line (TensorFlow's own error: a URL, a kernel or a missing-name message)."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone,
                                                                     project=project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as e:
        reason = " ".join(str(e).split())
        raise ValueError(f"no TPU at --tpu_name={tpu or ''} ({reason[:200]}): on a TPU VM give "
                         f"--tpu_name=local, on a TPU node its name (with --tpu_zone, "
                         f"--gcp_project); without a TPU, drop --use_tpu (--strategy=auto takes "
                         f"the GPUs or the CPU)") from None
    return resolver


def cpu_has_native_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return False
    return any(flag in text for flag in (" avx512_bf16", " amx_bf16"))


def resolve_precision(precision, strategy):
    """The concrete precision for `auto`, from the strategy's devices."""
    if precision != "auto":
        return PRECISION_ALIASES.get(precision, precision)
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "bfloat16"
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        major = tf.config.experimental.get_device_details(gpus[0]).get(
            "compute_capability", (0, 0))[0]
        return "bfloat16" if major >= 8 else "float16"
    return "bfloat16" if cpu_has_native_bf16() else "none"


def set_precision_policy(precision):
    """Sets the global Keras policy; returns its name."""
    policy = {"none": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
    if precision not in policy:
        raise ValueError(f"--mixed_precision={precision!r}: use one of {', '.join(PRECISIONS)}")
    keras.mixed_precision.set_global_policy(policy[precision])
    return policy[precision]


def resolve_jit_compile(jit_compile, strategy):
    """True/False for `auto`, "true", "false" or a bool: auto compiles on TPU and GPU only (on
    these CPUs the XLA step measured slower than oneDNN's, docs/benchmarks.md)."""
    if isinstance(jit_compile, bool):
        return jit_compile
    value = str(jit_compile).lower()
    if value not in JIT_CHOICES:
        raise ValueError(f"--jit_compile={jit_compile!r}: use one of {', '.join(JIT_CHOICES)}")
    if value != "auto":
        return value == "true"
    return (isinstance(strategy, tf.distribute.TPUStrategy)
            or bool(tf.config.list_logical_devices("GPU")))


def describe_compilation(strategy, whole_step_jit, gradients_jit):
    """What of the training step XLA compiles, for the log."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        return "the TPU compiles the whole step with XLA"
    if whole_step_jit:
        return "forward, backward and update compiled as one XLA computation"
    if gradients_jit:
        return "forward and backward compiled with XLA, the update outside it"
    return "TensorFlow ops, XLA only in each variable's optimizer update"


def check_batch_sizes(strategy, train_batch_size=None, accumulation=1, **other_sizes):
    """Every global batch size divides over the replicas (the training one over replicas ×
    accumulation steps): checked before any work, not met after training."""
    replicas = strategy.num_replicas_in_sync
    if accumulation < 1:
        raise ValueError(f"--gradient_accumulation_steps={accumulation} must be at least 1")
    if train_batch_size is not None and (train_batch_size < 1
                                         or train_batch_size % (replicas * accumulation)):
        raise ValueError(f"--train_batch_size={train_batch_size} must divide into {replicas} "
                         f"replicas × {accumulation} accumulation steps")
    for flag, size in other_sizes.items():
        if size is not None and (size < 1 or size % replicas):
            raise ValueError(f"--{flag}={size} must be a multiple of the {replicas} replicas")
    if train_batch_size is not None:
        logging.info("Training batch %d: %d replica(s) × %d accumulation step(s) × %d examples "
                     "a micro-batch", train_batch_size, replicas, accumulation,
                     train_batch_size // (replicas * accumulation))


def setup(strategy="auto", use_tpu=False, tpu_name=None, tpu_zone=None, gcp_project=None,
          master=None, mixed_precision="auto", jit_compile="auto", attention="auto"):
    """(strategy, jit_compile, step kernels) from the values of the shared flags (FLAG_NAMES);
    sets the global precision policy and logs what was chosen. The `StepKernels` go to the
    model that runs the training step."""
    chosen = get_strategy(strategy, use_tpu, tpu_name, tpu_zone, gcp_project, master)
    policy = set_precision_policy(resolve_precision(mixed_precision, chosen))
    compiled = resolve_jit_compile(jit_compile, chosen)
    on_tpu = isinstance(chosen, tf.distribute.TPUStrategy)
    on_gpu = bool(tf.config.list_logical_devices("GPU")) and not on_tpu
    mode = resolve_attention(attention, compiled, on_gpu, on_tpu)
    logging.info("Precision policy %s (--mixed_precision=%s); XLA compilation of the training "
                 "step %s (--jit_compile=%s); attention %s (--attention=%s)", policy,
                 mixed_precision, "on" if compiled else "off", jit_compile, mode, attention)
    return chosen, compiled, StepKernels(mode, xla_gpu=compiled and on_gpu)


def log_step_memory(model, optimizer, strategy, options):
    """The training step's memory (a step_memory.StepMemory: the estimate for `model` and
    `optimizer` under the global policy, the GPU it runs on), logged: on a GPU, with a warning
    where it exceeds the GPU's memory; elsewhere as a DEBUG line. `model.config`: its
    AlbertConfig (None: no estimate, e.g. a TF-Hub encoder without one); `options`:
    TrainerOptions."""
    config, shape = model.config, options.step_shape
    policy = keras.mixed_precision.global_policy()
    estimate = None
    if config is not None and shape is not None:
        parameters = sum(v.shape.num_elements() for v in model.trainable_variables)
        slots = round(sum(v.shape.num_elements() for v in optimizer.variables) / parameters)
        fused = _attention_fused(options.step_kernels, config, shape.seq_length, policy)
        xla_gpu = options.step_kernels is not None and options.step_kernels.xla_gpu
        estimate = functools.partial(step_bytes, config, parameters, shape=shape,
                                     policy=policy.name, optimizer_slots=slots,
                                     fused_attention=fused, rewritten=xla_gpu)
    on_gpu = bool(tf.config.list_logical_devices("GPU")) and not isinstance(
        strategy, tf.distribute.TPUStrategy)
    memory = StepMemory(estimate, options.global_batch_size, strategy.num_replicas_in_sync,
                        options.gradient_accumulation_steps, shape, policy.name,
                        "GPU:0" if on_gpu else None, gpu_memory_bytes() if on_gpu else None)
    line, warns = memory.log_line()
    if line is not None:
        logging.log(logging.WARNING if warns else logging.INFO if on_gpu else logging.DEBUG,
                    "%s", line)
    return memory


def _attention_fused(kernels, config, seq_length, policy):
    """Whether a training step traced with `kernels` (setup's StepKernels) runs its attention
    fused, keeping no [heads, seq, seq] probabilities."""
    with traced_with(kernels):
        return fused_reason(tf.as_dtype(policy.compute_dtype), 1, seq_length, seq_length,
                            config.hidden_size // config.num_attention_heads,
                            config.attention_probs_dropout_prob, True) is None


def is_chief_task():
    """Whether TF_CONFIG makes this process its job's chief (also without TF_CONFIG), before
    any strategy exists: the task named "chief", else worker 0 of a cluster without one."""
    config = json.loads(os.environ.get("TF_CONFIG", "{}") or "{}")
    task = config.get("task") or {}
    if not task:
        return True
    if task.get("type") == "chief":
        return True
    return (task.get("type") == "worker" and int(task.get("index", 0)) == 0
            and "chief" not in config.get("cluster", {}))


def is_chief(strategy):
    """Whether this process writes checkpoints, summaries and results."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None or (task_type == "worker" and task_id == 0 and
                             "chief" not in resolver.cluster_spec().as_dict()):
        return True
    return task_type == "chief"
