"""The flags run_classifier, run_squad and run_race share: the original fine-tuning flags with
the original's defaults per script, plus strategy, precision, padding and classifier_dropout."""

import dataclasses
import functools
import math
import typing

from absl import app, flags

from albert_tf.data.features import PADDINGS
from albert_tf.modeling.optimizers import FINETUNING_UPDATE
from albert_tf.serving.lite import LITE_FILES, QUANTIZATIONS
from albert_tf.training import distribution, excursions

# The fine-tuning update's settings (modeling.optimizers.FINETUNING_UPDATE) by flag name.
UPDATE_FLAGS = {"bias_correction": "bias_correction", "decay_after_warmup": "decay_after_warmup",
                "epsilon": "adam_epsilon", "weight_decay_rate": "weight_decay_rate"}


def update_settings(FLAGS):  # noqa: N803 (absl's FLAGS object)
    """finetuning_optimizer's settings from the flags."""
    return {key: getattr(FLAGS, flag) for key, flag in UPDATE_FLAGS.items()}


def define_flags(max_seq_length=512, train_batch_size=32, eval_batch_size=8,
                 predict_batch_size=8, learning_rate=5e-5, train_step=1000,
                 save_checkpoints_steps=1000, padding="bucket", flag_values=None):
    """The original fine-tuning flags plus strategy, precision, padding and classifier_dropout;
    scripts pass the original's defaults for the numbers. Flags already defined (another script
    imported in the same process, as in tests) are left as they are."""
    S, B, I, F, E = (flags.DEFINE_string, flags.DEFINE_bool, flags.DEFINE_integer,
                     flags.DEFINE_float, flags.DEFINE_enum)
    fv = flags.FLAGS if flag_values is None else flag_values

    def D(define, name, *args, **kwargs):  # noqa: N802
        define_if_missing(define, name, *args, flag_values=fv, **kwargs)
    D(S, "data_dir", None, "Directory of the task's input files.")
    D(S, "output_dir", None, "Checkpoints, eval_results.txt and predictions.")
    D(S, "cached_dir", None, "Where feature caches live; default --output_dir.")
    D(S, "albert_config_file", None,
      "albert_config.json; default: the config beside --init_checkpoint (or in the hub "
      "module's assets).")
    D(S, "spm_model_file", None,
      "SentencePiece model (the English releases' 30k-clean.model). Omitted (or "
      "'from_tf_hub'): the hub module's asset, or the vocabulary beside --init_checkpoint.")
    D(S, "vocab_file", None,
      "WordPiece vocabulary (the Chinese releases' vocab_chinese.txt), with --spm_model_file "
      "absent or empty. Beside --spm_model_file it may only be that model's .vocab listing.")
    D(S, "init_checkpoint", None,
      "Initial weights: an original release, a Hugging Face directory, one of our "
      "checkpoints (pretraining or fine-tuned), or a model's name (albert_base_v2, "
      "hf://albert/albert-base-v2, albert_base_en_uncased, brightmart/albert_tiny_zh, a TF-Hub "
      "address: docs/models.md).")
    D(S, "albert_hub_module_handle", None,
      "A TF2 SavedModel with the TF-Hub text-encoder API (path or handle), instead of "
      "--init_checkpoint.")
    D(B, "do_lower_case", None, "Lowercase the text (uncased models); default: the setting the "
      "model carries (a hub export's, a Hugging Face tokenizer_config.json), else true.")
    D(I, "max_seq_length", max_seq_length, "Longest sequence after tokenization.", lower_bound=1)
    D(B, "do_train", False, "Fine-tune on the training split.")
    D(B, "do_eval", False,
      "Evaluate every saved checkpoint on the dev split and keep the best as "
      "model.ckpt-best.")
    D(B, "do_predict", False, "Predict the test split (from model.ckpt-best).")
    D(I, "train_batch_size", train_batch_size, "Global training batch size.", lower_bound=1)
    D(I, "eval_batch_size", eval_batch_size, "Global eval batch size.", lower_bound=1)
    D(I, "predict_batch_size", predict_batch_size, "Global predict batch size.", lower_bound=1)
    D(F, "learning_rate", learning_rate, "Peak learning rate.", validator=POSITIVE)
    D(I, "train_step", train_step, "Training steps (global batches).", lower_bound=1)
    D(F, "num_train_epochs", None, "If set, train this many epochs instead of --train_step.")
    D(I, "warmup_step", 0, "Linear warmup steps.", lower_bound=0)
    D(F, "warmup_proportion", None,
      "If set, warm up for this fraction of the training steps instead of --warmup_step.")
    D(I, "save_checkpoints_steps", save_checkpoints_steps,
      "Steps between checkpoints (each is evaluated with --do_eval).", lower_bound=1)
    D(I, "keep_checkpoint_max", 5, "Checkpoints kept besides model.ckpt-best.", lower_bound=1)
    D(I, "iterations_per_loop", 1000,
      "Accepted for compatibility; see --steps_per_execution.")
    D(I, "num_tpu_cores", 8, "Accepted for compatibility.")
    D(E, "optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
    D(B, "bias_correction", FINETUNING_UPDATE["bias_correction"],
      "Adam's bias correction of the moment estimates. The original had none: its first "
      "updates are 3-6x Adam's (--nobias_correction --nodecay_after_warmup is its update).")
    D(B, "decay_after_warmup", FINETUNING_UPDATE["decay_after_warmup"],
      "Decay the learning rate linearly from --learning_rate at the end of the warmup to 0; "
      "false: from step 0, as the original (the peak after warmup is then below it).")
    D(F, "adam_epsilon", FINETUNING_UPDATE["epsilon"], "Epsilon of the Adam denominator.",
      validator=POSITIVE)
    D(F, "weight_decay_rate", FINETUNING_UPDATE["weight_decay_rate"],
      "Decoupled weight decay (LayerNorm and bias variables excluded).", lower_bound=0)
    D(F, "classifier_dropout", 0.1,
      "Dropout before the task head (the original hard-coded 0.1).")
    D(E, "padding", padding, PADDINGS,
      "bucket: training batches grouped by length and every batch padded only to its "
      "longest sequence (rounded up to --pad_to_multiple_of); batch: the same without "
      "grouping (random batches, as transformers draws them; run_ner's default, which "
      "learned tagging better: docs/finetuning.md); "
      "max_length: everything padded to --max_seq_length (the original; best on TPU).")
    D(I, "pad_to_multiple_of", 16,
      "Round padded lengths up to this multiple, so that a bounded number of shapes is "
      "traced.", lower_bound=1)
    D(I, "steps_per_execution", 1, "Training steps per tf.function call.", lower_bound=1)
    D(I, "gradient_accumulation_steps", 1, "Micro-batches per step.", lower_bound=1)
    D(I, "log_steps", 100, "Steps between progress lines.", lower_bound=1)
    D(I, "random_seed", 12345, "Seed of initialisation, dropout and shuffling.")
    # Fine-tuning warns: a recovery's defaults were measured on pretraining only.
    excursions.define_flags(D, "warn")
    if "strategy" not in fv:
        distribution.define_flags(fv)


def define_export_flags(what, flag_values=None):
    """--export_dir (`what`: the exports it writes) and --overwrite_export, where missing."""
    def define(kind, name, *args, **kwargs):
        define_if_missing(kind, name, *args, flag_values=flag_values, **kwargs)
    define(flags.DEFINE_string, "export_dir", None,
           f"Write the fine-tuned model here (from model.ckpt-best, else the latest "
           f"checkpoint in --output_dir): {what} (see docs/export.md).")
    define(flags.DEFINE_bool, "overwrite_export", False,
           "Replace an earlier export at --export_dir (nothing else is ever replaced).")
    define(flags.DEFINE_enum, "export_tflite", "both", list(LITE_FILES),
           "Which LiteRT files --export_dir gets: the ids-level model (with its TFLite "
           "Task Library variant, <name>_task_library.tflite, where the library "
           "runs the task), the string-in model (<name>_text.tflite, the tokenizer "
           "inside), both, or none.")
    define(flags.DEFINE_enum, "tflite_quantization", "none", list(QUANTIZATIONS),
           "The exported .tflite files' weights: float32 (none), float16, int8 with "
           "float activations (dynamic_int8), or int8 weights and activations "
           "calibrated on the task's training data (int8). The export reports each "
           "file's size and dev score beside the float32 model's "
           "(tflite_report.json).")
    define(flags.DEFINE_bool, "tflite_report", True,
           "Score the exported .tflite files (and the float32 model) on the whole dev "
           "set, one example at a time, into the log and tflite_report.json.")


def require_action(FLAGS, export=True):  # noqa: N803 (absl's FLAGS object)
    """A usage error unless the flags ask for something: train, evaluate, predict (or export)."""
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict
            or export and FLAGS.export_dir):
        raise app.UsageError("at least one of --do_train, --do_eval, --do_predict must be true"
                             + (" (or --export_dir)" if export else ""))


# A validator for learning rates: (check, message).
POSITIVE = (lambda v: math.isfinite(v) and v > 0, "must be a positive number")


def define_if_missing(define, name, *args, flag_values=None, validator=None, **kwargs):
    """Defines a flag unless another script in this process already did (tests import all),
    with `validator` ((check, message)) checked when the flags are parsed."""
    fv = flags.FLAGS if flag_values is None else flag_values
    if name not in fv:
        define(name, *args, flag_values=fv, **kwargs)
        if validator:
            flags.register_validator(name, *validator, flag_values=fv)


# ---- the same settings as a typed object, for Python callers ------------------------------------

_TYPES = {"bool": bool, "int": int, "float": float, "string": str, "string enum": str, "list": list}


def _option_flags():
    """A FlagValues with every flag the fine-tuning driver reads, at the generic defaults."""
    fv = flags.FlagValues()
    define_flags(flag_values=fv)
    define_export_flags("see the scripts", flag_values=fv)
    fv.mark_as_parsed()
    return fv


def _check_options(options):
    """Each value has its flag's type and passes its flag's checks (enum values, bounds)."""
    fv = _option_flags()
    for field in dataclasses.fields(options):
        value, flag = getattr(options, field.name), fv[field.name]
        if value is None:
            continue
        kind = _TYPES.get(flag.flag_type(), object)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
            setattr(options, field.name, value)
        if kind is list and isinstance(value, tuple):
            value = list(value)
            setattr(options, field.name, value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{field.name}={value!r}: expected {kind.__name__}")
        choices = getattr(flag.parser, "enum_values", None)
        if choices and value not in choices:
            raise ValueError(f"{field.name}={value!r}: one of {', '.join(choices)}")
        try:
            setattr(fv, field.name, value)  # runs the flag's validators
        except flags.IllegalFlagValueError as e:
            raise ValueError(f"{field.name}={value!r}: {e}") from None


def _options_class():
    fv = _option_flags()
    fields = []
    for name in sorted(fv):
        flag = fv[name]
        kind = _TYPES.get(flag.flag_type(), object)
        default = flag.default
        if isinstance(default, list):
            field = dataclasses.field(default_factory=functools.partial(list, default))
        else:
            field = dataclasses.field(default=default)
        fields.append((name, kind if default is not None else typing.Optional[kind], field))
    doc = ("The fine-tuning scripts' flags as typed fields with their defaults, for "
           "`run_finetuning` from Python:\n\n    FinetuningOptions(output_dir=\"out\", "
           "init_checkpoint=\"albert_base\", do_train=True, learning_rate=2e-5)\n\n"
           "Values are checked as the command line checks them (type, choices, bounds); "
           "`from_flags(FLAGS)` fills one from a script's parsed flags.\n\n"
           + "\n".join(f"{name}: {fv[name].help}" for name in sorted(fv)))
    return dataclasses.make_dataclass(
        "FinetuningOptions", fields, namespace={
            "__doc__": doc, "__module__": __name__, "__post_init__": _check_options,
            "from_flags": classmethod(lambda cls, values: cls(**{
                f.name: getattr(values, f.name) for f in dataclasses.fields(cls)
                if hasattr(values, f.name)}))})


FinetuningOptions = _options_class()


def finetuning_options(**values):
    """FinetuningOptions(**values), naming every unknown option in one error."""
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(FinetuningOptions)})
    if unknown:
        raise ValueError(f"unknown fine-tuning options: {', '.join(unknown)}")
    return FinetuningOptions(**values)

