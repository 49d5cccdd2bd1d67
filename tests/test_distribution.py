"""The one place that picks strategy, precision and XLA: flags and the `auto` choices."""

import json
import os
import re
import socket
import subprocess
import sys

import keras
import pytest
import tensorflow as tf
from absl import flags

from albert_tf.config import AlbertConfig
from albert_tf.modeling.step_kernels import StepKernels
from albert_tf.training import distribution


def _parse(*argv):
    values = flags.FlagValues()
    distribution.define_flags(values)
    values(["prog", *argv])
    return values


def test_flags_take_auto_and_the_boolean_forms():
    assert _parse().jit_compile == "auto" and _parse().mixed_precision == "auto"
    assert _parse("--jit_compile").jit_compile == "true"
    assert _parse("--nojit_compile").jit_compile == "false"
    assert _parse("--jit_compile=False").jit_compile == "false"
    assert _parse("--mixed_precision=float16").mixed_precision == "float16"
    # Keras's policy names, which the log prints (once refused).
    for keras_name, ours in (("mixed_bfloat16", "bfloat16"), ("mixed_float16", "float16"),
                             ("float32", "none")):
        assert _parse(f"--mixed_precision={keras_name}").mixed_precision == ours
    with pytest.raises(flags.IllegalFlagValueError):
        _parse("--jit_compile=sometimes")
    with pytest.raises(flags.IllegalFlagValueError):
        _parse("--mixed_precision=fp8")


def test_auto_choices_on_this_cpu():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    # No GPU or TPU here: XLA stays off (slower than oneDNN on these CPUs, docs/benchmarks.md).
    assert distribution.resolve_jit_compile("auto", strategy) is False
    assert distribution.resolve_jit_compile("true", strategy) is True
    assert distribution.resolve_jit_compile(False, strategy) is False
    with pytest.raises(ValueError, match="--jit_compile='maybe'"):
        distribution.resolve_jit_compile("maybe", strategy)
    with open("/proc/cpuinfo") as f:
        native_bf16 = any(flag in f.read() for flag in (" avx512_bf16", " amx_bf16"))
    assert distribution.resolve_precision("auto", strategy) == (
        "bfloat16" if native_bf16 else "none")
    assert distribution.resolve_precision("float16", strategy) == "float16"


def test_a_tpu_that_cannot_be_reached_is_one_line():
    """--use_tpu on a machine without a TPU (a child process: connecting changes TensorFlow's
    context for good): the one line names the flag to drop, not a traceback."""
    code = ("from albert_tf.training.distribution import get_strategy\n"
            "try:\n    get_strategy(use_tpu=True, tpu_name='local')\n"
            "except ValueError as e:\n    print('LINE', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300).stdout
    [line] = [line for line in out.splitlines() if line.startswith("LINE ")]
    assert line.startswith("LINE no TPU at --tpu_name=local (TPUs not found in the cluster."), line
    assert line.endswith("): on a TPU VM give --tpu_name=local, on a TPU node its name (with "
                         "--tpu_zone, --gcp_project); without a TPU, drop --use_tpu "
                         "(--strategy=auto takes the GPUs or the CPU)"), line


@pytest.mark.parametrize("tf_config,said", [
    ('{"cluster": {"worker": ["a:1", "b:2"]}', "TF_CONFIG is not JSON ("),
    ('{"cluster": {"worker": ["a:1", "b:2"]}}', 'TF_CONFIG names no task: give each worker its '
                                                'own "task": {"type": "worker", "index": i}'),
    ('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}',
     "TF_CONFIG's task is worker 2, but its cluster lists 2 worker(s) (indexes 0 to 1)")])
def test_a_bad_tf_config_is_named(monkeypatch, tf_config, said):
    monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError, match=re.escape(said)):
        distribution.get_strategy("auto")


def _multi_worker(tf_config, waits=(900, 30)):
    """get_strategy('multi_worker_mirrored') in a child process (it changes TensorFlow's
    context for good): (exit status, stdout, stderr)."""
    code = ("from albert_tf.training import distribution\n"
            f"distribution.WORKER_WAIT_SECONDS, distribution.WORKER_WAIT_LOG_SECONDS = {waits}\n"
            "try:\n    distribution.get_strategy('multi_worker_mirrored')\n"
            "except ValueError as e:\n    print('LINE', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "TF_CONFIG": tf_config})
    return done.returncode, done.stdout, done.stderr


def test_a_worker_that_never_starts_or_a_port_in_use_is_one_line():
    """TensorFlow waits without end, deaf to SIGTERM, for a worker of TF_CONFIG that was not
    started: a watch says whom it waits for, then stops it. A port another process
    holds: one line asking whether it is in use (once a 42-line traceback)."""
    with socket.socket() as held, socket.socket() as spare:
        held.bind(("localhost", 0))
        held.listen()
        spare.bind(("localhost", 0))
        ports = held.getsockname()[1], spare.getsockname()[1]
    cluster = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
               "task": {"type": "worker", "index": 0}}
    code, _, err = _multi_worker(json.dumps(cluster), waits=(4, 1))
    assert code == -9, err[-2000:]  # SIGKILL: the only signal TensorFlow's wait hears
    assert (f"Waiting 1 s for TF_CONFIG's other workers to connect (worker 1 at "
            f"localhost:{ports[1]}): every one must be started") in err
    assert (f"error: TF_CONFIG's other workers did not all connect in 4 s (worker 1 at "
            f"localhost:{ports[1]}): start each with its own task index, then rerun") in err
    with socket.socket() as held:
        held.bind(("localhost", 0))
        held.listen()
        port = held.getsockname()[1]
        cluster["cluster"]["worker"][0] = f"localhost:{port}"
        _, out, err = _multi_worker(json.dumps(cluster))
    [line] = [line for line in out.splitlines() if line.startswith("LINE ")] or [err[-2000:]]
    assert line.startswith(f"LINE TF_CONFIG: worker 0 could not serve at localhost:{port} ("), line
    assert line.endswith("): is the port in use, by another run?"), line


def test_the_memory_estimate_counts_the_attention_the_step_runs():
    """Fused (no probabilities kept) where the model's step kernels run cuDNN's attention: an
    XLA step on a GPU, bfloat16 or float16, from MIN_FUSED_SEQ tokens under auto."""
    config = AlbertConfig(vocab_size=60, hidden_size=16, num_attention_heads=2,
                          attention_probs_dropout_prob=0)
    gpu_step = StepKernels("auto", xla_gpu=True)
    bf16, f32 = keras.mixed_precision.Policy("mixed_bfloat16"), keras.mixed_precision.Policy(
        "float32")
    fused = distribution._attention_fused
    assert fused(gpu_step, config, 128, bf16) and fused(gpu_step, config, 512, bf16)
    assert not fused(gpu_step, config, 64, bf16)  # auto: plain below 128 tokens
    assert not fused(gpu_step, config, 128, f32)
    assert not fused(StepKernels(), config, 128, bf16)
    assert not fused(None, config, 128, bf16)  # a step traced without setup's kernels
    dropout = AlbertConfig(vocab_size=60, hidden_size=16, num_attention_heads=2,
                           attention_probs_dropout_prob=0.1)
    assert not fused(gpu_step, dropout, 128, bf16)
