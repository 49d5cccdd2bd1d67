"""`TrainerOptions`: what a `training.trainer.Trainer` is told besides its strategy, model,
optimizer and output directory, as one typed object (the scripts fill it from their flags of
the same names)."""

import dataclasses
from typing import TYPE_CHECKING, Any

from albert_tf.training.step_memory import StepShape

if TYPE_CHECKING:  # for the annotations only: both modules import TensorFlow
    from albert_tf.modeling.step_kernels import StepKernels
    from albert_tf.training.excursions import ExcursionSettings
    from albert_tf.training.run_lock import RunLock


@dataclasses.dataclass(frozen=True)
class TrainerOptions:
    """How a Trainer trains, saves and logs."""
    # The batch of one step over every replica and micro-batch.
    global_batch_size: int
    # Micro-batches a step's batch is split into; their gradients are summed into one update.
    gradient_accumulation_steps: int = 1
    # Steps run in one call of the traced loop (fewer round trips to the host).
    steps_per_execution: int = 1
    # XLA: the whole step on one device, the forward and backward pass under other strategies.
    jit_compile: bool = False
    # A checkpoint every this many steps, and at the last.
    save_checkpoints_steps: int = 1000
    # A progress line (and train summaries) every this many steps, and at the last.
    log_steps: int = 100
    # Checkpoints kept; with a loss guard, also those a recovery may go back to.
    keep_checkpoint_max: int = 5
    # Recorded in run.json with the first checkpoint ("pretraining", "fine-tuning of sst-2"):
    # only a run of the same kind resumes the directory (checkpoint_files.check_run_kind).
    run_kind: str | None = None
    # The run's options as JSON values, recorded beside its kind; a resume with others says
    # which changed (checkpoint_files.changed_settings).
    run_settings: dict | None = None
    # Its vocabulary is kept with the first checkpoint: output_dir is a load_tokenizer source.
    tokenizer: Any = None
    # The run's lock on output_dir, verified before each save (training.run_lock).
    run_lock: "RunLock | None" = None
    # The loss guard's settings (training.excursions); None: no guard.
    excursions: "ExcursionSettings | None" = None
    # The step's input, for its memory estimate (training.step_memory); None: no estimate.
    step_shape: StepShape | None = None
    # The kernels the model's step traces with (distribution.setup's), for the same estimate.
    step_kernels: "StepKernels | None" = None
