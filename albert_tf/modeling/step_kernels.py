"""StepKernels: which attention and GELU kernels a training step is traced with, chosen once the
strategy and XLA are settled (`training.distribution.setup`) and handed to the model, which
traces its call under them."""

import contextlib
import dataclasses

from albert_tf.modeling import attention, kernels
from albert_tf.modeling.attention import MIN_FUSED_SEQ


@dataclasses.dataclass(frozen=True)
class StepKernels:
    """`attention`: one of attention.MODES (resolved: `fused` or `auto` only for an XLA step on
    a GPU), fused from `min_fused_seq` tokens under `auto`; `xla_gpu`: the step is XLA-compiled
    for a GPU, where XLA's own fusion of GELU replaces the bias + GELU kernel and the
    `kernels.XLA_GPU_REWRITES` apply."""
    attention: str = "plain"
    min_fused_seq: int = MIN_FUSED_SEQ
    xla_gpu: bool = False


@contextlib.contextmanager
def traced_with(step_kernels):
    """The block a model's call traces in: under `step_kernels`, or with None under whatever
    the caller chose (an encoder inside a pretrainer, a test's `attention.using`)."""
    if step_kernels is None:
        yield
        return
    with attention.using(step_kernels.attention, step_kernels.min_fused_seq), \
            kernels.on_xla_gpu(step_kernels.xla_gpu):
        yield
