"""The flags run_classifier, run_squad, run_race and run_ner share, made from the fields of
`FinetuningOptions` (tasks/options.py) with the original's defaults per script."""

import dataclasses
import sys

from absl import app, flags, logging

from albert_tf.files import absolute_path
from albert_tf.tasks.options import (DATA_PATH_FLAGS, EXPORT_FIELDS, FinetuningOptions,
                                     flag_definition)
from albert_tf.training import distribution, excursions
from albert_tf.training.checkpoint_files import recorded_settings, run_directory_of

# The fine-tuning update's settings (modeling.optimizers.FINETUNING_UPDATE) by flag name.
UPDATE_FLAGS = {"bias_correction": "bias_correction", "decay_after_warmup": "decay_after_warmup",
                "epsilon": "adam_epsilon", "weight_decay_rate": "weight_decay_rate"}


def update_settings(options):
    """finetuning_optimizer's settings from the options."""
    return {key: getattr(options, flag) for key, flag in UPDATE_FLAGS.items()}


def define_flags(flag_values=None, **script_defaults):
    """The fine-tuning flags, one for each field of FinetuningOptions but the exports' (see
    define_export_flags); scripts pass the original's defaults for the numbers
    (max_seq_length=128, ...). Flags already defined (another script imported in the same
    process, as in tests) are left as they are."""
    fv = flags.FLAGS if flag_values is None else flag_values

    def define(kind, name, *args, **kwargs):
        define_if_missing(kind, name, *args, flag_values=fv, **kwargs)
    define_fields([f for f in dataclasses.fields(FinetuningOptions)
                   if f.name not in EXPORT_FIELDS and not f.metadata["defined_by"]],
                  define, **script_defaults)
    # Fine-tuning warns: a recovery's defaults were measured on pretraining only.
    excursions.define_flags(define, "warn")
    if "strategy" not in fv:
        distribution.define_flags(fv)


def define_fields(fields, define, **defaults):
    """A flag for each of `fields` (of tasks/options.py's classes) through `define(kind, name,
    *args, **kwargs)` (define_if_missing, or a script's helper), `defaults` replacing theirs."""
    for field in fields:
        kind, name, args, kwargs = flag_definition(field, defaults.get(field.name, field.default))
        define(kind, name, *args, **kwargs)


def define_export_flags(what, flag_values=None):
    """--export_dir (`what`: the exports it writes) and the other export flags, where missing."""
    fields = {f.name: f for f in dataclasses.fields(FinetuningOptions)}
    for name in EXPORT_FIELDS:
        define, name, args, kwargs = flag_definition(fields[name], what=what)
        define_if_missing(define, name, *args, flag_values=flag_values, **kwargs)


def script_settings(FLAGS):  # noqa: N803 (absl's FLAGS object)
    """The parsed values of a script's own flags, those that are not FinetuningOptions' fields
    (the data: task name, files, columns, windows...), by name: `run_finetuning` records them
    in run.json beside the options."""
    fields = {f.name for f in dataclasses.fields(FinetuningOptions)}
    main = getattr(sys.modules.get("__main__"), "__file__", None)  # absl's name for a main's
    ours = {id(f) for module, defined in FLAGS.flags_by_module_dict().items()
            if module.startswith("albert_tf.") or module == main for f in defined}
    return {name: absolute_path(FLAGS[name].value) if name in DATA_PATH_FLAGS
            else FLAGS[name].value
            for name in sorted(FLAGS) if name not in fields and id(FLAGS[name]) in ours}


# How a script cuts its examples, and where run_classifier's and run_ner's files hold them: a
# rerun that leaves one out takes the run's.
LENGTH_FLAGS = ("max_seq_length", "doc_stride", "max_query_length", "max_qa_length",
                "window_stride")
READING_FLAGS = LENGTH_FLAGS + ("text_column_names", "label_column_name", "id_column_name",
                                "label_delimiter", "delimiter", "fold_label_case")


def keep_how_the_run_read(FLAGS, data_flags=(), unread=()):  # noqa: N803 (absl's FLAGS object)
    """Each of READING_FLAGS the script has and was not given: the value the run in
    --output_dir last trained with (run.json), so that a rerun (resuming, evaluating, predicting,
    exporting) reads examples as the run trained on them; one that names no model (no
    --init_checkpoint) takes its --albert_hub_module_handle, whose variables are its encoder's.
    A rerun that names none of
    `data_flags` (where the examples are: --task_name, --data_dir, the files) takes the run's
    too, so that `--output_dir=RUN --export_dir=DIR` exports RUN's task. A command that does not
    train, into a directory with no run, takes them from the run in --init_checkpoint (its
    model's), where it is one. Each value taken is logged, except those of `unread` (files no
    action of this rerun reads)."""
    if not FLAGS.output_dir:
        return
    run = FLAGS.output_dir
    recorded = recorded_settings(run)
    init = FLAGS.init_checkpoint if "init_checkpoint" in FLAGS else None
    init_run = init and run_directory_of(init)
    if not recorded and not FLAGS.do_train and init_run:
        theirs = recorded_settings(init_run)
        if theirs:
            run, recorded, data_flags = init_run, theirs, ()  # (its files: not ours)
    names = [name for name in READING_FLAGS if name in FLAGS]
    if "albert_hub_module_handle" in FLAGS and not init:
        names.append("albert_hub_module_handle")
    if not any(FLAGS[name].present for name in data_flags):
        names += data_flags
    for name in names:
        value = recorded.get(name)
        if not FLAGS[name].present and value and value != FLAGS[name].value:
            setattr(FLAGS, name, value)
            if name not in unread:
                logging.info("--%s=%s, as the run in %s trained (run.json)", name, ",".join(value)
                             if isinstance(value, list) else value, run)


def require_action(FLAGS, export=True):  # noqa: N803 (absl's FLAGS object)
    """A usage error unless the flags ask for something: train, evaluate, predict (or export)."""
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict
            or export and FLAGS.export_dir):
        raise app.UsageError("at least one of --do_train, --do_eval, --do_predict must be true"
                             + (" (or --export_dir)" if export else ""))


def define_if_missing(define, name, *args, flag_values=None, validator=None, **kwargs):
    """Defines a flag unless another script in this process already did (tests import all),
    with `validator` ((check, message)) checked when the flags are parsed."""
    fv = flags.FLAGS if flag_values is None else flag_values
    if name not in fv:
        define(name, *args, flag_values=fv, **kwargs)
        if validator:
            flags.register_validator(name, *validator, flag_values=fv)
