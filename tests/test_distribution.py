"""The one place that picks strategy, precision and XLA: flags and the `auto` choices."""

import pytest
import tensorflow as tf
from absl import flags

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
