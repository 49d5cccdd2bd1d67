"""What a training step needs in device memory, estimated from the model's config, the batch and
the precision (pure arithmetic, without TensorFlow), and the micro-batch that fits a device.

The estimate counts what the step holds when its backward pass begins: the weights in float32,
the optimizer's slots, the float32 gradients and the weights cast to the compute dtype, and
for each layer the activations it keeps for its backward pass. No constant is fitted; checked
against XLA's compiled memory statistics of nine steps on an NVIDIA H200, and of the XLA step
on a GPU as it is now compiled for one without a device (docs/benchmarks.md, "Memory of a step:
the estimate against the measured").
"""

import dataclasses
import os
import subprocess

GIB = 2 ** 30
# Bytes of one value in the compute dtype of each Keras policy.
COMPUTE_BYTES = {"float32": 4, "mixed_bfloat16": 2, "mixed_float16": 2}
FLOAT32 = 4
# The share of a device's memory a step may count on: TensorFlow's allocator reserves some,
# and the buffers fragment.
USABLE_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class StepShape:
    """What the scripts know of a step's input that the model does not: the (padded) sequence
    length, the masked positions of each pretraining sequence (its MLM head; 0 without one),
    the sequences each example holds (a multiple-choice example: one per choice) and the rows
    of each sequence the last block computes (a sentence head's step: [CLS] alone, pretraining's:
    [CLS] and the masked positions; None: every row)."""
    seq_length: int
    masked_positions: int = 0
    sequences_per_example: int = 1
    last_block_rows: int | None = None


def layer_bytes_per_token(config, seq_length, compute_bytes, fused_attention, rewritten=False):
    """What one layer keeps per token for the backward pass: its input, query, key, value,
    the attention's context and the first LayerNorm's output (hidden-sized, compute dtype); the
    two LayerNorms' inputs (float32: XLA keeps the float32 sums they normalize); the feed-forward
    layer's input to the activation, the activation's own saved term and its output
    (intermediate-sized); without the fused attention, the attention probabilities ([heads,
    seq] a token), and with dropout its masks. `rewritten`: the XLA step on a GPU with
    `kernels.XLA_GPU_REWRITES`, whose LayerNorms keep their inputs in the compute dtype and
    whose GELU keeps no term of its own."""
    h, i = config.hidden_size, config.intermediate_size
    ln_inputs = 2 * h * (compute_bytes if rewritten else FLOAT32)
    kept = 6 * h * compute_bytes + ln_inputs + (2 if rewritten else 3) * i * compute_bytes
    if config.hidden_dropout_prob > 0:
        kept += 2 * h  # one byte a value for each of the two masks
    if not fused_attention:
        scores = config.num_attention_heads * seq_length
        kept += scores * compute_bytes
        if config.attention_probs_dropout_prob > 0:
            kept += scores * (1 + compute_bytes)  # the mask and the dropped probabilities
    return kept


def step_bytes(config, parameters, batch, shape, policy, optimizer_slots, fused_attention,
               rewritten=False):
    """The estimated peak device memory in bytes of one training step on `batch` examples (per
    replica and micro-batch) of `shape` (a StepShape), for a model with `parameters` trainable
    values, under the Keras `policy` name, with an optimizer that keeps `optimizer_slots`
    float32 values per weight; `rewritten` as for layer_bytes_per_token."""
    a = COMPUTE_BYTES[policy]
    cast = a if a < FLOAT32 else 0  # the weights cast to the compute dtype
    weights = parameters * (FLOAT32 * (2 + optimizer_slots) + cast)  # + gradients and slots
    sequences = batch * shape.sequences_per_example
    tokens = sequences * shape.seq_length
    e, h = config.embedding_size, config.hidden_size
    blocks = config.num_hidden_layers * config.inner_group_num  # the blocks a token runs
    layer = layer_bytes_per_token(config, shape.seq_length, a, fused_attention, rewritten)
    # Each block's activations, the embeddings (before and after their LayerNorm) and the
    # encoder's output; a last block that computes only some rows keeps its input, keys and
    # values for every token, the rest for those rows.
    rows = shape.seq_length if shape.last_block_rows is None else shape.last_block_rows
    every_row = 3 * h * a
    per_token = (blocks - 1) * layer + every_row + e * (a + FLOAT32) + h * a
    per_row = layer - every_row
    # The MLM head at each masked position: its hidden state, transform and LayerNorm, and the
    # logits over the vocabulary in the compute dtype and in float32 for the softmax.
    masked = sequences * shape.masked_positions
    per_masked = h * a + e * (a + FLOAT32) + config.vocab_size * (a + FLOAT32)
    return weights + tokens * per_token + sequences * rows * per_row + masked * per_masked


def batch_that_fits(estimate, device_bytes, batch):
    """The largest micro-batch below `batch` whose estimate (`estimate(b)` in bytes) fits
    USABLE_SHARE of `device_bytes`; None where the estimate cannot tell (no estimate, the
    device's memory unknown, `batch` itself estimated to fit or no batch estimated to)."""
    if not (device_bytes and estimate) or estimate(batch) <= USABLE_SHARE * device_bytes:
        return None
    return next((b for b in range(batch - 1, 0, -1)
                 if estimate(b) <= USABLE_SHARE * device_bytes), None)


def accumulation_that_fits(global_batch, replicas, accumulation, fitting):
    """The smallest multiple of `accumulation` that splits `global_batch` over `replicas` into
    micro-batches of at most `fitting` examples (at worst of one): the global batch kept."""
    micro = global_batch // (replicas * accumulation)
    factor = next(f for f in range(2, micro + 1)
                  if micro % f == 0 and micro // f <= fitting) if micro > 1 else 1
    return accumulation * factor


def gib(nbytes):
    """`nbytes` as the messages print it: in GiB, below one GiB in MiB."""
    return f"{nbytes / GIB:.1f} GiB" if nbytes >= GIB else f"{nbytes / 2 ** 20:.1f} MiB"


def gpu_memory_bytes(index=0):
    """The total memory of the `index`th GPU TensorFlow sees, from nvidia-smi (TensorFlow tells
    its name, not its size); None without nvidia-smi or where it fails."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    device = visible.split(",")[index].strip() if visible else str(index)
    try:
        found = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
             "-i", device], capture_output=True, text=True, timeout=10, check=True)
        return int(found.stdout.split()[0]) * 2 ** 20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


@dataclasses.dataclass(frozen=True)
class StepMemory:
    """One run's step and device: what the log line and the out-of-memory error say.
    `estimate(b)`: the step's bytes for a micro-batch of b examples (None: no estimate, e.g.
    a TF-Hub encoder or no `shape`); `device`: its name ("GPU:0"; None on a CPU),
    `device_bytes` its memory (None: unknown)."""
    estimate: object
    global_batch: int
    replicas: int
    accumulation: int
    shape: StepShape | None
    policy: str
    device: str | None = None
    device_bytes: int | None = None

    @property
    def batch(self):
        """The examples of one micro-batch on one replica."""
        return self.global_batch // (self.replicas * self.accumulation)

    @property
    def needed(self):
        return self.estimate(self.batch) if self.estimate else None

    def needs(self):
        """`the step needs about 15.6 GiB of GPU memory (estimate; batch 32 x 512,
        mixed_bfloat16)`; None without an estimate."""
        if self.needed is None:
            return None
        choices = self.shape.sequences_per_example
        batch = f"{self.batch} x {choices}" if choices > 1 else f"{self.batch}"
        return (f"the step needs about {gib(self.needed)} of "
                f"{'GPU' if self.device else 'device'} memory (estimate; batch {batch} x "
                f"{self.shape.seq_length}, {self.policy})")

    def log_line(self):
        """The line before training (None without an estimate), and whether it warns: the
        step needs more than the device has."""
        needs = self.needs()
        if needs is None:
            return None, False
        line = needs[0].upper() + needs[1:]
        if not self.device_bytes:
            return line, False
        if self.needed <= self.device_bytes:
            return f"{line} of {gib(self.device_bytes)} on {self.device}", False
        return (f"{line}, more than the {gib(self.device_bytes)} of {self.device}: "
                f"{self.advice()}"), True

    def advice(self):
        """Which micro-batch fits (from the estimate, else half the batch may) and the
        accumulation that keeps the global batch."""
        fitting = batch_that_fits(self.estimate, self.device_bytes, self.batch)
        fits = "fits" if fitting else "may fit"
        fitting = fitting or max(1, self.batch // 2)
        steps = accumulation_that_fits(self.global_batch, self.replicas, self.accumulation,
                                       fitting)
        each = " a replica" if self.replicas > 1 else ""
        return (f"a micro-batch of {self.global_batch // (self.replicas * steps)}{each} "
                f"{fits}, and --gradient_accumulation_steps={steps} keeps the global batch of "
                f"{self.global_batch}")

    def out_of_memory(self, step, last_checkpoint):
        """The one line of a step that ran out of memory."""
        length = f" and --max_seq_length={self.shape.seq_length}" if self.shape else ""
        needs = self.needs()
        if needs and self.device_bytes:
            needs += f" and {self.device} has {gib(self.device_bytes)}"
        return (f"out of memory in the training step at --train_batch_size={self.global_batch}"
                f"{length}{': ' + needs if needs else ''}; {self.advice()}. Training stopped "
                f"after step {step} without saving; last checkpoint: "
                f"{last_checkpoint or 'none'}.")
