"""`FinetuningOptions`: every setting of a fine-tuning run as a typed field with its default and
its help. The scripts' flags are made from these fields (`tasks.flags`); `prepare` and
`run_finetuning` read one of these objects, whether a script filled it from its flags or Python
code built it. `PretrainingOptions` is the same for run_pretraining."""

import dataclasses
import functools
import math
from typing import Optional

from absl import flags

from albert_tf.data.features import PADDINGS
from albert_tf.files import absolute_path
from albert_tf.modeling.attention import MIN_FUSED_SEQ, MODES
from albert_tf.modeling.optimizers import FINETUNING_UPDATE, OPTIMIZER_NAMES
from albert_tf.serving.lite_files import LITE_FILES, QUANTIZATIONS
from albert_tf.training.distribution import FLAG_NAMES, JIT_CHOICES, PRECISIONS, STRATEGIES
from albert_tf.training.excursions import ACTIONS, ExcursionSettings

# The data a rerun that names none takes from run.json: recorded as absolute paths, so that it
# finds them from any directory.
DATA_PATH_FLAGS = ("data_dir", "train_file", "validation_file", "test_file", "predict_file")
# A validator for learning rates: (check, message).
POSITIVE = (lambda v: math.isfinite(v) and v > 0, "must be a positive number")
# Fields whose flags training.distribution and training.excursions define for every training
# script; tests/test_options.py holds these fields to those flags.
DISTRIBUTION, EXCURSIONS = "distribution", "excursions"
_EXCURSIONS = ExcursionSettings()


def option(default, help_text, choices=None, lower_bound=None, validator=None,
           defined_by=None):
    """A field with its flag's help, choices (an enum flag), lower bound and validator
    ((check, message)); `defined_by` names the module whose flags define it elsewhere."""
    return dataclasses.field(default=default, metadata=dict(
        help=help_text, choices=choices, lower_bound=lower_bound, validator=validator,
        defined_by=defined_by))


def same_option(cls, name, default=dataclasses.MISSING):
    """`cls`'s field `name` (its help, choices, bounds) for another class, `default` replacing
    its default."""
    field = cls.__dataclass_fields__[name]
    return dataclasses.field(default=field.default if default is dataclasses.MISSING else default,
                             metadata=field.metadata)


@dataclasses.dataclass
class LoopOptions:
    """The training loop's settings, one flag each in run_pretraining and the fine-tuning
    scripts (run_pretraining's default for save_checkpoints_steps is 5000)."""
    save_checkpoints_steps: int = option(
        1000, "Steps between checkpoints (each is evaluated with --do_eval).", lower_bound=1)
    keep_checkpoint_max: int = option(5, "Checkpoints kept besides model.ckpt-best; 0: all "
                                      "(as the original's Estimator).", lower_bound=0)
    iterations_per_loop: int = option(1000,
                                      "Accepted for compatibility; see --steps_per_execution.")
    num_tpu_cores: int = option(
        8, "Accepted for compatibility; the TPU strategy discovers its cores.")
    steps_per_execution: int = option(1, "Training steps per tf.function call.", lower_bound=1)
    gradient_accumulation_steps: int = option(
        1, "Split each replica's batch into this many micro-batches and sum their gradients: "
        "the same update with less memory (a step out of memory names the value that keeps "
        "--train_batch_size).", lower_bound=1)
    log_steps: int = option(100, "Steps between progress lines and summaries.", lower_bound=1)
    random_seed: int = option(
        12345, "Seed of the weight initialisation, dropout and input shuffling.")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            setattr(self, field.name, _checked(type(self), field, getattr(self, field.name)))

    @classmethod
    def from_flags(cls, values):
        """The options from a script's parsed flags (or any object with them as attributes)."""
        return cls(**{f.name: getattr(values, f.name) for f in dataclasses.fields(cls)
                      if hasattr(values, f.name)})

    def settings(self):
        """Every option by name but the export's (what a run exports, like what it does, is
        each rerun's own choice): what run.json records of the run (checkpoint_files)."""
        return {k: absolute_path(v) if k in DATA_PATH_FLAGS else v
                for k, v in dataclasses.asdict(self).items() if k not in EXPORT_FIELDS}

    # The classes built on this one hold the distribution and loss guard fields.
    def distribution(self):
        """training.distribution.setup's arguments."""
        return {name: getattr(self, name) for name in FLAG_NAMES}

    def excursions(self):
        """The loss guard's settings (training.excursions)."""
        return ExcursionSettings(
            action=self.on_loss_spike, spike_sigmas=self.loss_spike_sigmas,
            rise_tolerance=self.loss_rise_tolerance, smoothing_steps=self.loss_smoothing_steps,
            eval_rises=self.eval_loss_rises, lr_factor=self.recovery_lr_factor,
            max_recoveries=self.max_loss_recoveries)


@dataclasses.dataclass
class FinetuningOptions(LoopOptions):
    """The fine-tuning scripts' flags as typed fields with their defaults, for `prepare` and
    `run_finetuning` from Python:

        FinetuningOptions(output_dir="out", init_checkpoint="albert_base", do_train=True,
                          learning_rate=2e-5)

    Values are checked as the command line checks them (type, choices, bounds); an int is
    taken for a float. `from_flags(FLAGS)` fills one from a script's parsed flags (the flags it
    lacks keep their defaults). The training loop's fields come from `LoopOptions`. The
    defaults are run_classifier's; each script passes the original's numbers for
    max_seq_length, batch sizes, learning rate and steps to its flags. Each field's help is its
    flag's (`python -m albert_tf.run_classifier --helpfull`).
    """
    # Inputs and outputs.
    data_dir: Optional[str] = option(None, "Directory of the task's input files.")
    output_dir: Optional[str] = option(None, "Checkpoints, eval_results.txt and predictions.")
    cached_dir: Optional[str] = option(None, "Where feature caches live; default --output_dir.")
    albert_config_file: Optional[str] = option(
        None, "albert_config.json; default: the config beside --init_checkpoint (or in the hub "
        "module's assets).")
    spm_model_file: Optional[str] = option(
        None, "SentencePiece model (the English releases' 30k-clean.model). Omitted (or "
        "'from_tf_hub'): the hub module's asset, or the vocabulary beside --init_checkpoint.")
    vocab_file: Optional[str] = option(
        None, "WordPiece vocabulary (the Chinese releases' vocab_chinese.txt), with "
        "--spm_model_file absent or empty. Beside --spm_model_file it may only be that model's "
        ".vocab listing.")
    init_checkpoint: Optional[str] = option(
        None, "Initial weights: an original release, a Hugging Face directory, one of our "
        "checkpoints (pretraining or fine-tuned), or a model's name (albert_base_v2, "
        "hf://albert/albert-base-v2, albert_base_en_uncased, brightmart/albert_tiny_zh, a TF-Hub "
        "address: docs/models.md).")
    albert_hub_module_handle: Optional[str] = option(
        None, "A TF2 SavedModel with the TF-Hub text-encoder API (path or handle), instead of "
        "--init_checkpoint.")
    do_lower_case: Optional[bool] = option(
        None, "Lowercase the text (uncased models); default: the setting the model carries (a "
        "hub export's, a Hugging Face tokenizer_config.json), else true.")
    max_seq_length: int = option(512, "Longest sequence after tokenization.", lower_bound=1)
    # What to do.
    do_train: bool = option(False, "Fine-tune on the training split.")
    do_eval: bool = option(
        False, "Evaluate every saved checkpoint on the dev split and keep the best as "
        "model.ckpt-best.")
    do_predict: bool = option(False, "Predict the test split (from model.ckpt-best).")
    # Batches, steps and the update.
    train_batch_size: int = option(32, "Global training batch size.", lower_bound=1)
    eval_batch_size: int = option(8, "Global eval batch size.", lower_bound=1)
    predict_batch_size: int = option(8, "Global predict batch size.", lower_bound=1)
    learning_rate: float = option(5e-5, "Peak learning rate.", validator=POSITIVE)
    train_step: int = option(1000, "Training steps (global batches).", lower_bound=1)
    num_train_epochs: Optional[float] = option(
        None, "If set, train this many epochs instead of --train_step.")
    warmup_step: int = option(0, "Linear warmup steps.", lower_bound=0)
    warmup_proportion: Optional[float] = option(
        None, "If set, warm up for this fraction of the training steps instead of "
        "--warmup_step.")
    optimizer: str = option("adamw", "Optimizer.", choices=OPTIMIZER_NAMES)
    bias_correction: bool = option(
        FINETUNING_UPDATE["bias_correction"],
        "Adam's bias correction of the moment estimates. The original had none: its first "
        "updates are 3-6x Adam's (--nobias_correction --nodecay_after_warmup is its update).")
    decay_after_warmup: bool = option(
        FINETUNING_UPDATE["decay_after_warmup"],
        "Decay the learning rate linearly from --learning_rate at the end of the warmup to 0; "
        "false: from step 0, as the original (the peak after warmup is then below it).")
    adam_epsilon: float = option(FINETUNING_UPDATE["epsilon"],
                                 "Epsilon of the Adam denominator (transformers': 1e-8).",
                                 validator=POSITIVE)
    weight_decay_rate: float = option(
        FINETUNING_UPDATE["weight_decay_rate"],
        "Decoupled weight decay (LayerNorm and bias variables excluded).", lower_bound=0)
    classifier_dropout: float = option(
        0.1, "Dropout before the task head (the original hard-coded 0.1).")
    # Input batches.
    padding: str = option(
        "bucket", "bucket: training batches grouped by length and every batch padded only to "
        "its longest sequence (rounded up to --pad_to_multiple_of); batch: the same without "
        "grouping (random batches, as transformers draws them; run_ner's default, which "
        "learned tagging better: docs/finetuning.md); "
        "max_length: everything padded to --max_seq_length (the original; best on TPU).",
        choices=PADDINGS)
    pad_to_multiple_of: int = option(
        16, "Round padded lengths up to this multiple, so that a bounded number of shapes is "
        "traced.", lower_bound=1)
    # The loss guard (training.excursions); fine-tuning warns: a recovery's defaults were
    # measured on pretraining only.
    on_loss_spike: str = option(
        "warn", "A loss excursion (a spike, a smoothed training loss that keeps rising above "
        "its best, with run_pretraining's --do_eval a held-out MLM loss that keeps rising): "
        "recover (back to the newest checkpoint from before it, past the batches that led "
        "into it, at a lower learning rate), warn or stop (docs/pretraining.md, \"Loss "
        "excursions\").", choices=ACTIONS, defined_by=EXCURSIONS)
    loss_spike_sigmas: float = option(
        _EXCURSIONS.spike_sigmas,
        "A spike: a step's loss this many standard deviations above the smoothed loss.",
        validator=POSITIVE, defined_by=EXCURSIONS)
    loss_rise_tolerance: float = option(
        _EXCURSIONS.rise_tolerance,
        "A rise: the smoothed loss this fraction above its best for --loss_smoothing_steps.",
        validator=POSITIVE, defined_by=EXCURSIONS)
    loss_smoothing_steps: int = option(
        _EXCURSIONS.smoothing_steps,
        "Window of the smoothed training loss, and the patience of a rise.", lower_bound=1,
        defined_by=EXCURSIONS)
    eval_loss_rises: int = option(
        _EXCURSIONS.eval_rises,
        "Pretraining only (fine-tuning reads no held-out loss): a held-out excursion, the eval "
        "MLM loss rose at this many evaluations in a row.",
        lower_bound=1, defined_by=EXCURSIONS)
    recovery_lr_factor: float = option(
        _EXCURSIONS.lr_factor, "Each recovery multiplies the learning rate by this (1: "
        "unchanged).", validator=(lambda v: 0 < v <= 1, "must be in (0, 1]"),
        defined_by=EXCURSIONS)
    max_loss_recoveries: int = option(
        _EXCURSIONS.max_recoveries, "Recoveries before an excursion stops the run.",
        lower_bound=0, defined_by=EXCURSIONS)
    # Strategy, precision and compilation (training.distribution).
    strategy: str = option(
        "auto", "tf.distribute strategy; auto: tpu with --use_tpu, multi_worker_mirrored when "
        "TF_CONFIG names several workers, mirrored with several GPUs, else one_device.",
        choices=STRATEGIES, defined_by=DISTRIBUTION)
    use_tpu: bool = option(False, "Train on a TPU (same as --strategy=tpu).",
                           defined_by=DISTRIBUTION)
    tpu_name: Optional[str] = option(None, "Cloud TPU name or grpc:// address.",
                                     defined_by=DISTRIBUTION)
    tpu_zone: Optional[str] = option(None, "GCE zone of the Cloud TPU.",
                                     defined_by=DISTRIBUTION)
    gcp_project: Optional[str] = option(None, "GCP project of the Cloud TPU.",
                                        defined_by=DISTRIBUTION)
    master: Optional[str] = option(None, "TensorFlow master address (TPU).",
                                   defined_by=DISTRIBUTION)
    mixed_precision: str = option(
        "auto", "Compute precision; auto: bfloat16 on TPU, on GPUs with bf16 support and on "
        "CPUs with AVX512-BF16/AMX, float16 on older GPUs, else none (Keras's names float32, "
        "mixed_bfloat16 and mixed_float16 are taken too).", choices=PRECISIONS,
        defined_by=DISTRIBUTION)
    jit_compile: str = option(
        "auto", "Compile the training step with XLA: auto (on GPU and TPU; off on CPU, where "
        "XLA was slower than oneDNN), true or false.", choices=JIT_CHOICES,
        defined_by=DISTRIBUTION)
    attention: str = option(
        "auto", "Attention in training steps: fused (cuDNN flash attention, needs XLA on a GPU "
        "and bfloat16/float16), plain, or auto: fused in an XLA step on a GPU from sequence "
        f"length {MIN_FUSED_SEQ} without attention dropout, else plain.", choices=MODES,
        defined_by=DISTRIBUTION)
    # Exports (--export_dir's help names what each script writes).
    export_dir: Optional[str] = option(
        None, "Write the fine-tuned model here (from model.ckpt-best, else the latest "
        "checkpoint in --output_dir): {what} (see docs/export.md).")
    overwrite_export: bool = option(
        False, "Replace an earlier export at --export_dir (nothing else is ever replaced).")
    export_tflite: str = option(
        "both", "Which LiteRT files --export_dir gets: the ids-level model (with its TFLite "
        "Task Library variant, <name>_task_library.tflite, where the library runs the task), "
        "the string-in model (<name>_text.tflite, the tokenizer inside), both, or none.",
        choices=LITE_FILES)
    tflite_quantization: str = option(
        "none", "The exported .tflite files' weights: float32 (none), float16, int8 with float "
        "activations (dynamic_int8), or int8 weights and activations calibrated on the task's "
        "training data (int8). The export reports each file's size and dev score beside the "
        "float32 model's (tflite_report.json).", choices=QUANTIZATIONS)
    tflite_report: bool = option(
        True, "Score the exported .tflite files (and the float32 model) on the whole dev set, "
        "one example at a time, into the log and tflite_report.json.")


@dataclasses.dataclass
class PretrainingOptions(LoopOptions):
    """run_pretraining's flags as typed fields with the original's defaults:

        PretrainingOptions(albert_config_file="albert_config.json", input_file="train-*",
                           output_dir="out", num_train_steps=10000)

    Checked and filled from the flags as FinetuningOptions (`from_flags(FLAGS)`). Each field's
    help is its flag's (`python -m albert_tf.run_pretraining --helpfull`); the loss guard and
    distribution fields are FinetuningOptions', the guard recovering by default.
    """
    # Inputs and outputs.
    albert_config_file: Optional[str] = option(
        None, "albert_config.json of the model to train; default: the config beside "
        "--init_checkpoint, else the one the run wrote into --output_dir.")
    input_file: Optional[str] = option(None, "Training TFRecords: comma-separated globs.")
    eval_input_file: Optional[str] = option(
        None, "Held-out TFRecords for --do_eval; defaults to --input_file (the original evaluated "
        "on its training files).")
    output_dir: Optional[str] = option(None, "Checkpoints, summaries and eval_results.txt.")
    init_checkpoint: Optional[str] = option(
        None, "Initial weights: an original release, a Hugging Face directory, one of our "
        "checkpoints or a model's name (docs/models.md). Ignored when --output_dir already holds "
        "a checkpoint.")
    max_seq_length: int = option(512, "Sequence length of the records.", lower_bound=1)
    max_predictions_per_seq: int = option(20, "Masked positions per record.", lower_bound=1)
    # What to do, batches, steps and the update.
    do_train: bool = option(True, "Train.")
    do_eval: bool = option(False, "Evaluate (after each checkpoint when training).")
    train_batch_size: int = option(4096, "Global training batch size.", lower_bound=1)
    eval_batch_size: int = option(64, "Global eval batch size.", lower_bound=1)
    optimizer: str = option("lamb", "Optimizer.", choices=OPTIMIZER_NAMES)
    bias_correction: bool = option(
        False, "Adam's bias correction of the moment estimates (the original had none; with "
        "LAMB it changes only the LayerNorm and bias updates, docs/pretraining.md).")
    learning_rate: float = option(0.00176, "Peak learning rate.", validator=POSITIVE)
    poly_power: float = option(1.0, "Power of the polynomial decay.")
    num_train_steps: int = option(125000, "Training steps (global batches).", lower_bound=1)
    num_warmup_steps: int = option(3125, "Linear warmup steps.", lower_bound=0)
    start_warmup_step: int = option(0, "Step at which the warmup starts.", lower_bound=0)
    max_eval_steps: int = option(100, "Eval batches per evaluation.", lower_bound=0)
    init_from_group0: bool = option(
        False, "Initialise groups missing from --init_checkpoint from group 0 (warm start of a "
        "deeper or more-grouped model).")
    sop_weight: float = option(1.0, "Weight of the SOP loss; 0 trains MLM only.", lower_bound=0)
    # Masks drawn as the batches are read.
    dynamic_masking: bool = option(
        False, "Draw new masks for every batch from the records' token_boundary (the original "
        "n-gram rule) instead of using the records' static masks.")
    masked_lm_prob: float = option(0.15, "With --dynamic_masking: masked fraction of tokens.",
                                   validator=(lambda v: 0 < v <= 1, "must be in (0, 1]"))
    ngram: int = option(3, "With --dynamic_masking: longest masked span, in words.",
                        lower_bound=1)
    favor_shorter_ngram: bool = option(
        True, "With --dynamic_masking: p(n) ∝ 1/n; False reverses the array.")
    mask_token_id: int = option(
        4, "With --dynamic_masking: the id of [MASK] (default: the vocabulary's, when "
        "--spm_model_file or --vocab_file is given; else 4).")
    # Batches read by a tf.data service.
    data_service_address: Optional[str] = option(
        None, "host:port of a tf.data service dispatcher (python -m albert_tf.data_service): its "
        "workers read and mask the training batches, the same batches as in-process.")
    data_service_timeout: float = option(
        600.0, "With --data_service_address: seconds to wait for every worker at the start, and "
        "for a training step before the run stops with the service named.", validator=POSITIVE)
    # The records' vocabulary.
    spm_model_file: Optional[str] = option(
        None, "Optional SentencePiece model of the records: checked against vocab_size; with "
        "--dynamic_masking its [MASK] id is used.")
    vocab_file: Optional[str] = option(
        None, "Optional WordPiece vocabulary of the records (the Chinese releases' "
        "vocab_chinese.txt), instead of --spm_model_file.")
    do_lower_case: Optional[bool] = option(
        None, "The records' lower-casing (create_pretraining_data's --do_lower_case), kept beside "
        "the checkpoints with the vocabulary; default: what the records carry (our builder "
        "writes it), else the setting beside --init_checkpoint, else true.")
    # The training loop: the original's checkpoint interval.
    save_checkpoints_steps: int = same_option(LoopOptions, "save_checkpoints_steps", 5000)
    # The loss guard (training.excursions): a recovery by default.
    on_loss_spike: str = same_option(FinetuningOptions, "on_loss_spike", "recover")
    loss_spike_sigmas: float = same_option(FinetuningOptions, "loss_spike_sigmas")
    loss_rise_tolerance: float = same_option(FinetuningOptions, "loss_rise_tolerance")
    loss_smoothing_steps: int = same_option(FinetuningOptions, "loss_smoothing_steps")
    eval_loss_rises: int = same_option(FinetuningOptions, "eval_loss_rises")
    recovery_lr_factor: float = same_option(FinetuningOptions, "recovery_lr_factor")
    max_loss_recoveries: int = same_option(FinetuningOptions, "max_loss_recoveries")
    # Strategy, precision and compilation (training.distribution).
    strategy: str = same_option(FinetuningOptions, "strategy")
    use_tpu: bool = same_option(FinetuningOptions, "use_tpu")
    tpu_name: Optional[str] = same_option(FinetuningOptions, "tpu_name")
    tpu_zone: Optional[str] = same_option(FinetuningOptions, "tpu_zone")
    gcp_project: Optional[str] = same_option(FinetuningOptions, "gcp_project")
    master: Optional[str] = same_option(FinetuningOptions, "master")
    mixed_precision: str = same_option(FinetuningOptions, "mixed_precision")
    jit_compile: str = same_option(FinetuningOptions, "jit_compile")
    attention: str = same_option(FinetuningOptions, "attention")


EXPORT_FIELDS = ("export_dir", "overwrite_export", "export_tflite", "tflite_quantization",
                 "tflite_report")
_KINDS = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer, float: flags.DEFINE_float,
          str: flags.DEFINE_string}


def value_type(field):
    """bool, int, float or str: the field's type without Optional."""
    return next(t for t in _KINDS if field.type in (t, Optional[t]))


def flag_definition(field, default=dataclasses.MISSING, what="see the scripts"):
    """(define, name, positional arguments, keyword arguments) of the field's flag, for
    `tasks.flags.define_if_missing`; `default` replaces the field's, `what` fills
    --export_dir's help."""
    m = field.metadata
    default = field.default if default is dataclasses.MISSING else default
    help_text = m["help"].format(what=what)
    kwargs = {key: m[key] for key in ("lower_bound", "validator") if m[key] is not None}
    if m["choices"]:
        return flags.DEFINE_enum, field.name, (default, list(m["choices"]), help_text), kwargs
    return _KINDS[value_type(field)], field.name, (default, help_text), kwargs


@functools.cache
def _parsers(cls):
    """A FlagValues with every field of `cls` as a flag, to check values as the command line
    does."""
    fv = flags.FlagValues()
    for field in dataclasses.fields(cls):
        define, name, args, kwargs = flag_definition(field)
        validator = kwargs.pop("validator", None)
        define(name, *args, flag_values=fv, **kwargs)
        if validator:
            flags.register_validator(name, *validator, flag_values=fv)
    fv.mark_as_parsed()
    return fv


def _checked(cls, field, value):
    """`value` as the field's type (an int for a float), checked by its flag's rules in `cls`."""
    if value is None:
        return None
    kind = value_type(field)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{field.name}={value!r}: expected {kind.__name__}")
    choices = field.metadata["choices"]
    if choices and value not in choices:
        raise ValueError(f"{field.name}={value!r}: one of {', '.join(choices)}")
    try:
        setattr(_parsers(cls), field.name, value)  # runs the flag's validators
    except flags.IllegalFlagValueError as e:
        raise ValueError(f"{field.name}={value!r}: {e}") from None
    return value


def finetuning_options(**values):
    """FinetuningOptions(**values), naming every unknown option in one error."""
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(FinetuningOptions)})
    if unknown:
        raise ValueError(f"unknown fine-tuning options: {', '.join(unknown)}")
    return FinetuningOptions(**values)
