"""The one place that picks strategy, precision and XLA: flags and the `auto` choices."""

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
