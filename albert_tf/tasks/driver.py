"""The fine-tuning driver that run_classifier, run_squad and run_race share: encoder and
tokenizer sources (checkpoint or TF-Hub SavedModel), then train / evaluate every checkpoint
(keeping the best) / predict / export around `training.Trainer`.

`prepare(options)` and `run_finetuning(task, options)` take one `FinetuningOptions`
(tasks/options.py: the scripts fill it from their flags) and `run_finetuning` a task: a
`tasks.base.FinetuningTask`, whose docstrings are the contract between the two.
"""

import dataclasses
import functools
import math
import os

import keras
import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.data.features import make_dataset, num_examples, real_outputs
from albert_tf.files import make_output_dir
from albert_tf.formats.resolve import BEST_NAME, read_best_record
from albert_tf.startup import tool_name
from albert_tf.tasks.flags import LENGTH_FLAGS, update_settings
from albert_tf.tasks.options import FinetuningOptions
from albert_tf.training import distribution
from albert_tf.training.checkpoint_files import (changed_settings, check_run_kind,
                                                 check_run_model, recorded_kind,
                                                 refuse_foreign_checkpoints,
                                                 resumable_checkpoints)
from albert_tf.training.results import (best_results, format_results, remove_stale_results,
                                       write_eval_results)
from albert_tf.training.run_lock import RunLock
from albert_tf.training.step_memory import StepShape
from albert_tf.training.stuck import StuckWatch


def train_and_warmup_steps(num_examples, train_batch_size, train_step, num_train_epochs=None,
                           warmup_step=0, warmup_proportion=None):
    """(training steps, warmup steps): epochs and proportions override the step counts."""
    if num_train_epochs is not None:
        if num_train_epochs <= 0:
            raise ValueError(f"--num_train_epochs must be positive, got {num_train_epochs}")
        train_step = max(1, math.ceil(num_examples * num_train_epochs / train_batch_size))
    if train_step < 1:
        raise ValueError(f"--train_step must be positive, got {train_step}")
    if warmup_proportion is not None:
        if not 0 <= warmup_proportion <= 1:
            raise ValueError(f"--warmup_proportion must be in [0, 1], got {warmup_proportion}")
        warmup_step = int(train_step * warmup_proportion)
    if not 0 <= warmup_step <= train_step:
        raise ValueError(f"--warmup_step={warmup_step} must be between 0 and the {train_step} "
                         f"training steps (or give --warmup_proportion, a fraction of them)")
    return int(train_step), int(warmup_step)


def prepare(options, head_names=None):
    """The scripts' common start: check the options (with the task's `head_names`, that an
    evaluation of --init_checkpoint has a head to evaluate), create --output_dir, and return the
    tokenizer from --spm_model_file / --vocab_file, the hub module's asset, the vocabulary
    beside --init_checkpoint or the one an earlier run kept in --output_dir."""
    from albert_tf.formats.hub import resolve_hub_handle
    from albert_tf.formats.resolve import vocabularies_beside
    from albert_tf.formats.tokenizers import load_tokenizer

    check_flags(options, head_names)
    explicit = bool(options.spm_model_file and options.spm_model_file != "from_tf_hub"
                    or options.vocab_file)
    hub = options.albert_hub_module_handle
    # The tokenizer may not give ids the model has no embedding for.
    vocab_size = None if hub else encoder_config(
        options.albert_config_file, options.init_checkpoint, options.output_dir).vocab_size
    # The model's vocabulary (the one the run in --output_dir kept beside its checkpoints,
    # which a rerun goes on from; else the hub module's or the one beside --init_checkpoint;
    # else one an earlier run kept in --output_dir): the tokenizer without a vocabulary flag,
    # and what a flag's must equal.
    kept = vocabularies_beside(options.output_dir)
    if kept and _saved_checkpoints(options.output_dir):
        carrier = options.output_dir
    else:
        carrier = resolve_hub_handle(hub) if hub else options.init_checkpoint
        if not carrier and not explicit and kept:
            carrier = options.output_dir
    tokenizer = load_tokenizer(
        options.spm_model_file, options.do_lower_case if explicit or not hub else None,
        model=carrier, vocab_size=vocab_size, vocab_file=options.vocab_file)
    make_output_dir(options.output_dir)
    return tokenizer


def check_flags(options, head_names=None):
    """What the fine-tuning flags must satisfy before anything is written (or read): the
    training and warmup steps where no epoch count needs the data's size; with --do_train, an
    --output_dir that is a run's or new (a release's is refused before any feature cache lands
    in it; the trainer checks again), and an --export_dir that replaces nothing but an earlier
    export (checked again when exporting); without --do_train, --do_eval needs a run's
    checkpoints there or an --init_checkpoint (holding the task's head, where `head_names`
    are given)."""
    if options.do_train and not resumable_checkpoints(options.output_dir):
        refuse_foreign_checkpoints(options.output_dir)
    if options.num_train_epochs is None or not options.do_train:  # (else the data's size counts)
        train_and_warmup_steps(0, options.train_batch_size, options.train_step, None,
                               options.warmup_step, options.warmup_proportion)
    if (options.do_eval and not options.do_train
            and not _evaluable_checkpoints(options.output_dir)):
        _check_model_to_evaluate(options, head_names)
    if options.export_dir:
        from albert_tf.serving.saved_model import check_export_dir  # only runs that export

        check_export_dir(options.export_dir, "export_dir", options.overwrite_export,
                         overwrite_flag="overwrite_export",
                         inputs={"output_dir": options.output_dir,
                                 "init_checkpoint": options.init_checkpoint,
                                 "albert_hub_module_handle": options.albert_hub_module_handle,
                                 "data_dir": options.data_dir,
                                 "spm_model_file": options.spm_model_file,
                                 "vocab_file": options.vocab_file,
                                 "albert_config_file": options.albert_config_file})


_EVALUATES = ("--do_eval without --do_train evaluates a fine-tuned model: the checkpoints of a "
              "run in --output_dir, or an --init_checkpoint with the task's head")


def _check_model_to_evaluate(options, head_names):
    """An evaluation without training or a run's checkpoints evaluates --init_checkpoint, a
    fine-tuned model: one without the task's head (a pretrained ALBERT) is refused."""
    if not options.init_checkpoint:
        raise ValueError(f"{_EVALUATES}; --output_dir={options.output_dir} holds no checkpoint "
                         f"and no --init_checkpoint is given")
    if head_names:
        from albert_tf.formats.checkpoints import read_checkpoint

        if not holds_heads(read_checkpoint(options.init_checkpoint)[0], head_names):
            raise _headless(options)


def _headless(options):
    return ValueError(f"{_EVALUATES}; --init_checkpoint={options.init_checkpoint} holds no head "
                      f"for this task (a pretrained model: add --do_train to fine-tune it)")


def holds_heads(names, head_names):
    """Whether checkpoint variable `names` hold every one of a task's `head_names` (names or
    prefixes)."""
    return all(any(n.startswith(head) for n in names) for head in head_names)


def encoder_config(albert_config_file=None, init_checkpoint=None, output_dir=None,
                   missing=None):
    """The AlbertConfig from --albert_config_file, beside --init_checkpoint, or the one a
    previous run wrote to --output_dir; `missing`: the error's words where none gives one."""
    from albert_tf.formats.resolve import resolve_checkpoint
    config_file = albert_config_file
    if not config_file and init_checkpoint:
        config_file = resolve_checkpoint(init_checkpoint)[2]
    if not config_file and output_dir:
        candidate = os.path.join(output_dir, "albert_config.json")
        config_file = candidate if tf.io.gfile.exists(candidate) else None
    if not config_file and init_checkpoint:
        raise ValueError(f"--init_checkpoint={init_checkpoint} has no albert_config.json or "
                         f"config.json beside it: give its config as --albert_config_file")
    if not config_file:
        raise ValueError(missing or (
            "no model given: --init_checkpoint (a pretrained ALBERT: a release directory, a "
            "checkpoint beside its albert_config.json, a model name) or "
            "--albert_hub_module_handle, or --albert_config_file to train one from random "
            "weights"))
    return AlbertConfig.from_json_file(config_file)


def encoder_factory(albert_config_file=None, init_checkpoint=None, hub_module_handle=None,
                    max_seq_length=None, output_dir=None, step_kernels=None):
    """A function that builds the encoder (call it under the strategy scope), its training
    steps traced with `step_kernels` (distribution.setup's)."""
    if hub_module_handle:
        from albert_tf.formats.hub import HubEncoder
        config = AlbertConfig.from_json_file(albert_config_file) if albert_config_file else None
        return lambda: HubEncoder(hub_module_handle, config)
    from albert_tf.modeling.encoder import AlbertEncoder
    config = encoder_config(albert_config_file, init_checkpoint, output_dir)
    if max_seq_length and max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} exceeds the model's "
                         f"max_position_embeddings={config.max_position_embeddings}: give "
                         f"--max_seq_length={config.max_position_embeddings} or less (the "
                         f"scripts' defaults are the original's, for its 512-position models)")
    return lambda: AlbertEncoder(config, step_kernels,
                                 dtype=keras.mixed_precision.global_policy())


# ---- the driver -------------------------------------------------------------------------------

def _saved_checkpoints(output_dir):
    state = tf.train.get_checkpoint_state(output_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    # (TensorFlow has joined a relative --output_dir to each already)
    return [os.path.join(output_dir, os.path.basename(p)) for p in paths]


def _evaluable_checkpoints(output_dir):
    """The run's checkpoints, model.ckpt-best first where none of the others holds its
    weights (best_checkpoint.txt names its source; a release's model.ckpt-best is not a
    run's)."""
    paths = _saved_checkpoints(output_dir)
    best = os.path.join(output_dir, BEST_NAME)
    record = read_best_record(output_dir)
    if recorded_kind(output_dir) and tf.io.gfile.exists(best + ".index") and not (
            record and os.path.basename(record["checkpoint"]) in map(os.path.basename, paths)):
        paths.insert(0, best)
    return paths


def _read_or_empty(path):
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read()


def _restore_for_inference(trainer, task, options, doing, head_required=False):
    """The run's checkpoint (resolve.run_checkpoint: model.ckpt-best, else the newest), else
    --init_checkpoint (without the task's head: a warning, or with `head_required` an error)."""
    from albert_tf.formats.resolve import run_checkpoint
    path, why = run_checkpoint(options.output_dir)
    if path and _one_of_the_run_s(options.init_checkpoint, options.output_dir):
        path, why = options.init_checkpoint, "--init_checkpoint: one of the run's checkpoints"
    if path:
        logging.info("%s with %s (%s)", doing.capitalize(), path, why)
        trainer.restore(path)
    elif options.init_checkpoint:
        loaded = trainer.model.load_checkpoint(options.init_checkpoint,
                                               allow_missing=tuple(task.head_names))
        if head_required and not holds_heads(loaded, task.head_names):
            raise _headless(options)
        if holds_heads(loaded, task.head_names):
            logging.info("No fine-tuned checkpoint in %s: %s with %s, which holds a %s head",
                         options.output_dir, doing, options.init_checkpoint, task.name)
        else:
            logging.warning("no fine-tuned checkpoint in %s; %s with %s, which holds no %s "
                            "head: the head is untrained", options.output_dir, doing,
                            options.init_checkpoint, task.name)
        task.align_warm_head(trainer.model, options.init_checkpoint)
    else:
        logging.warning("no checkpoint to use for %s: the task head is untrained", doing)


def _one_of_the_run_s(prefix, output_dir):
    """Whether checkpoint `prefix` is one in `output_dir` (a step of the run, named for
    predicting or exporting it rather than the run's best)."""
    return bool(prefix) and os.path.dirname(os.path.abspath(prefix)) == os.path.abspath(
        output_dir) and tf.io.gfile.exists(prefix + ".index")


class _Run:
    """One fine-tuning run: the trainer, its datasets and the best eval result so far."""

    def __init__(self, task, options, lock=None, data_settings=None):
        from albert_tf.modeling.optimizers import describe_update, finetuning_optimizer
        from albert_tf.training.trainer import Trainer
        from albert_tf.training.trainer_options import TrainerOptions

        self.task, self.flags = task, options
        keras.utils.set_random_seed(options.random_seed)
        strategy, jit_compile, step_kernels = distribution.setup(**options.distribution())
        distribution.check_batch_sizes(
            strategy, options.train_batch_size if options.do_train else None,
            options.gradient_accumulation_steps,
            eval_batch_size=options.eval_batch_size if options.do_eval else None,
            predict_batch_size=options.predict_batch_size if options.do_predict else None)
        self.padding = options.padding
        if isinstance(strategy, tf.distribute.TPUStrategy) and self.padding != "max_length":
            logging.warning("--padding=%s: a TPU compiles one program per input shape, so "
                            "batches are padded to --max_seq_length", self.padding)
            self.padding = "max_length"
        self.make_encoder = encoder_factory(
            options.albert_config_file, options.init_checkpoint, options.albert_hub_module_handle,
            options.max_seq_length, options.output_dir, step_kernels)
        self.train_features = task.train_features() if options.do_train else None
        self.num_train_steps, self.num_warmup_steps = train_and_warmup_steps(
            num_examples(self.train_features) if self.train_features else 0,
            options.train_batch_size, options.train_step,
            options.num_train_epochs if options.do_train else None, options.warmup_step,
            options.warmup_proportion)
        settings = update_settings(options)
        self.update = describe_update(options.optimizer, options.learning_rate, settings)
        self.trainer = Trainer(
            strategy, self.build_model,
            lambda: finetuning_optimizer(options.learning_rate, self.num_train_steps,
                                         self.num_warmup_steps, options.optimizer, **settings),
            options.output_dir, TrainerOptions(
                global_batch_size=options.train_batch_size,
                gradient_accumulation_steps=options.gradient_accumulation_steps,
                steps_per_execution=options.steps_per_execution, jit_compile=jit_compile,
                save_checkpoints_steps=options.save_checkpoints_steps,
                log_steps=options.log_steps, keep_checkpoint_max=options.keep_checkpoint_max,
                run_kind=run_kind(task.name),
                run_settings={**options.settings(), **(data_settings or {})},
                tokenizer=task.tokenizer,
                run_lock=lock, excursions=options.excursions(),
                step_shape=StepShape(options.max_seq_length,
                                     sequences_per_example=task.sequences_per_example,
                                     last_block_rows=task.last_block_rows),
                step_kernels=step_kernels))
        check_run_model(options.output_dir, self.trainer.model)
        self.eval_sets = task.eval_sets() if options.do_eval else []
        self.best, self.best_of = {}, None  # best_of: which model the results are of, if not
        # the best step's
        level = task.constant_loss(self.train_features) if self.train_features else None
        self.watch = StuckWatch(level, self.num_warmup_steps, options.learning_rate,
                                options.log_steps, self.num_train_steps, options.do_train)

    def build_model(self):
        return self.task.build_model(self.make_encoder())

    def dataset_fn(self, features, batch, is_training):
        f = self.flags

        def fn(input_context):
            return make_dataset(features, batch, f.max_seq_length, is_training=is_training,
                                input_context=input_context, padding=self.padding,
                                pad_to_multiple_of=f.pad_to_multiple_of, seed=f.random_seed)
        return fn

    def outputs(self, features, batch_size):
        return real_outputs(self.trainer.predict(self.dataset_fn(features, batch_size, False)))

    def evaluate(self, path, step):
        """Every eval set's metrics at this checkpoint, recorded (the best kept)."""
        results, evaluated = self.metrics(step)
        self.task.check_best_metric(results)
        if self.trainer.record_eval(results, path, self.task.best_metric,
                                    self.task.higher_is_better):
            self.best = results
            if distribution.is_chief_task():
                self.report(evaluated, step)
        elif not self.best:  # a resumed run: the best is an earlier process's
            self.best = best_results(self.flags.output_dir) or results

    def metrics(self, step):
        """(results: every eval set's metrics, the first set's unprefixed, and `step`;
        [(set name, features, outputs)])."""
        results, evaluated = {}, []
        for i, (name, features) in enumerate(self.eval_sets):
            outputs = self.outputs(features, self.flags.eval_batch_size)
            evaluated.append((name, features, outputs))
            metrics = self.task.eval_metrics(name, features, outputs)
            classes = self.task.predicted_classes(features, outputs)
            if classes is not None:
                self.watch.predictions(step, name, classes)
            prefix = "" if i == 0 else f"{name}_"
            results.update({prefix + k: float(v) for k, v in metrics.items()})
        results["global_step"] = step
        return results, evaluated

    def report(self, evaluated, step):
        """The new best evaluation's thresholds (picked first: the reports, predictions and
        exports after it use them) and reports."""
        for name, features, outputs in evaluated:
            self.task.pick_thresholds(name, features, outputs, self.flags.output_dir)
            self.task.report(name, features, outputs, step, self.flags.output_dir)

    def train(self):
        f = self.flags
        if distribution.is_chief_task():
            self.task.write_labels(f.output_dir)
        heads = tuple(self.task.head_names)  # a warm start's head may be another task's
        self.trainer.restore_or_initialize(f.init_checkpoint, allow_missing=heads,
                                           allow_reshaped=heads)
        if self.trainer.step == 0 and f.init_checkpoint:
            self.task.align_warm_head(self.trainer.model, f.init_checkpoint)
        if self.trainer.step == 0 and not (f.init_checkpoint or f.albert_hub_module_handle):
            logging.warning("no --init_checkpoint or --albert_hub_module_handle: the encoder "
                            "starts from random weights, not a pretrained ALBERT")
        if self.trainer.step >= self.num_train_steps and f.do_eval:
            results = os.path.join(f.output_dir, "eval_results.txt")
            if os.path.exists(results):
                logging.info("--output_dir holds a run trained to step %d (this command's last "
                             "step: %d), evaluated in %s: nothing to train or evaluate (--do_eval "
                             "without --do_train evaluates its checkpoints again; a larger "
                             "--train_step trains on)", self.trainer.step, self.num_train_steps,
                             results)
                return
            logging.info("--output_dir holds a run trained to step %d (this command's last "
                         "step: %d): --do_eval evaluates its checkpoints", self.trainer.step,
                         self.num_train_steps)
            self.evaluate_saved()
            return
        each = self.task.sequences_per_example
        _unused_step_counts(f, self.num_train_steps, self.num_warmup_steps)
        logging.info("Training %d steps (%d warmup) on %d %s", self.num_train_steps,
                     self.num_warmup_steps, num_examples(self.train_features),
                     "sequences" if each == 1 else f"examples of {each} sequences")
        logging.info("Update: %s", self.update)
        self.trainer.train(self.dataset_fn(self.train_features, f.train_batch_size, True),
                           self.num_train_steps,
                           on_checkpoint=self.evaluate if f.do_eval else None,
                           on_log=lambda step, metrics: self.watch.training_loss(
                               step, metrics["loss"]))

    def evaluate_saved(self):
        """Every checkpoint of the run in --output_dir (model.ckpt-best among them where no
        other holds its weights), else --init_checkpoint (check_flags: one of them is there).
        A run without a best picks it among them; a run's best (best_checkpoint.txt) stands,
        and the results are what this evaluation measured of it (its dev set or reading flags
        may not be the run's)."""
        out = self.flags.output_dir
        paths = _evaluable_checkpoints(out)
        record = read_best_record(out)
        for path in paths:
            self.trainer.restore(path)
            if record is None:
                self.evaluate(path, self.trainer.step)
            else:
                self.measure(path, record)
        if not paths:
            _restore_for_inference(self.trainer, self.task, self.flags, "evaluating",
                                   head_required=True)
            self.best, evaluated = self.metrics(0)
            self.best_of = f"of --init_checkpoint={self.flags.init_checkpoint}"
            logging.info("Eval %s: %s", self.best_of, format_results(self.best))
            if distribution.is_chief_task():
                self.report(evaluated, 0)

    def measure(self, path, record):
        """A run's checkpoint evaluated, its best left as it is (no summaries: the training's
        curves are the run's evaluations); the best's results and reports are this one's."""
        step = self.trainer.step
        results, evaluated = self.metrics(step)
        logging.info("Eval at step %d: %s", step, format_results(results))
        if os.path.basename(path) in (BEST_NAME, os.path.basename(record["checkpoint"])):
            self.best = results
            self.best_of = (f"of {BEST_NAME} (step {step}: the run's best, picked by its "
                            f"evaluations, {record['metric']} {record['value']:.4g})")
            if distribution.is_chief_task():
                for name, features, outputs in evaluated:
                    self.task.report(name, features, outputs, step, self.flags.output_dir)

    def predict(self):
        """Writes each prediction set; a task that can score its predictions (SQuAD against
        --predict_file's answers) writes the scores to eval_results.txt, as the original's
        --do_predict did, unless an evaluation's results are there (this run's --do_eval, or
        an earlier one's): then to predict_results.txt. Predictions with nothing to score them
        against remove an earlier prediction's predict_results.txt (it would read as theirs)."""
        _restore_for_inference(self.trainer, self.task, self.flags, "predicting")
        scored, chief = False, distribution.is_chief_task()
        for name, features in self.task.predict_sets():
            outputs = self.outputs(features, self.flags.predict_batch_size)  # every worker's
            if not chief:  # (the chief writes the files; two writers would race)
                continue
            scores = self.task.write_predictions(name, features, outputs, self.flags.output_dir)
            scored = scored or bool(scores)
            if scores:
                path = os.path.join(self.flags.output_dir, "eval_results.txt")
                if self.flags.do_eval or "global_step" in _read_or_empty(path):
                    path = os.path.join(self.flags.output_dir, "predict_results.txt")
                write_eval_results(path, scores)
                logging.info("Scored the %s set's predictions against its answers (%s): %s",
                             name, os.path.basename(path), format_results(scores))
        if chief and not scored:
            remove_stale_results(os.path.join(self.flags.output_dir, "predict_results.txt"),
                                 "these predictions have no answers to be scored against")

    def export(self, export_dir):
        from albert_tf.serving.saved_model import check_export_dir, float32_model

        _restore_for_inference(self.trainer, self.task, self.flags, "exporting")
        # Checked before training; again now, in case the directory changed since.
        check_export_dir(export_dir, "export_dir", self.flags.overwrite_export,
                         overwrite_flag="overwrite_export")
        model = float32_model(self.trainer.model, self.build_model)
        self.task.export(model, export_dir, self.lite_options(model), self.flags.output_dir)

    def lite_options(self, model):
        """The LiteRT files the flags ask for, int8's calibration sample (200 training
        examples, else dev ones) and the report's scoring on the dev set (skipped without one)."""
        # these load tensorflow-text: only runs that export
        from albert_tf.formats import litert
        from albert_tf.serving import lite

        f = self.flags
        options = lite.LiteOptions(files=f.export_tflite, quantization=f.tflite_quantization)
        dev = functools.cache(lambda: self.eval_sets[0] if self.eval_sets else _read_or_none(
            lambda: self.task.eval_sets()[0], "no dev set to score the .tflite files on"))
        if options.quantization == "int8":
            def calibration():
                sample = self.train_features or _read_or_none(
                    self.task.train_features, "no training data to calibrate int8 on")
                if sample is None and dev():
                    sample = dev()[1]
                if sample is None:
                    raise ValueError("--tflite_quantization=int8 calibrates on the task's "
                                     "training or dev data: found neither")
                return self._batches_of_one(sample, 200)
            options.calibration = calibration

        def score(flatbuffer):
            if not dev():
                return None
            name, features = dev()
            outputs = lite.score_ids_model(
                flatbuffer, self._batches_of_one(features),
                lambda batch, got: model.prediction_outputs(batch, model.eval_outputs(got)),
                total=num_examples(features))
            return {k: float(v) for k, v in self.task.eval_metrics(
                name, features, real_outputs(outputs)).items()}
        if f.tflite_report and options.files != "none":
            if litert.litert_installed():
                options.score = score
                options.metric = (self.task.best_metric, self.task.higher_is_better)
            else:
                logging.warning("No tflite_report.json: %s (or --notflite_report)",
                                litert.LITERT_MISSING)
        return options

    def _batches_of_one(self, features, count=None):
        """`count` examples spread over `features` (default all), one per batch, padded to
        --max_seq_length, as numpy."""
        n = num_examples(features)
        dataset = make_dataset(features, 1, self.flags.max_seq_length, is_training=False,
                               padding="max_length")
        if count and count < n:
            dataset = dataset.shard(n // count, 0).take(count)
        return dataset.as_numpy_iterator()


def _unused_step_counts(options, train_steps, warmup_steps):
    """A step count given beside the epochs or share that override it is said to be unused."""
    for count, by, value, steps in (("train_step", "num_train_epochs", options.num_train_epochs,
                                     train_steps),
                                    ("warmup_step", "warmup_proportion", options.warmup_proportion,
                                     warmup_steps)):
        if value is not None and getattr(options, count) != getattr(type(options), count):
            logging.warning("--%s=%d is not used: --%s=%g makes it %d", count,
                            getattr(options, count), by, value, steps)


def _read_or_none(read, why):
    try:
        return read()
    except (OSError, ValueError) as e:
        logging.warning("%s: %s", why, e)
        return None


def run_kind(task_name):
    """What run.json calls a fine-tuning run of the task `task_name`."""
    return f"fine-tuning of {task_name}"


def run_finetuning(task, options, data_settings=None):
    """Train, evaluate every checkpoint (keeping the best), predict and export, as the options
    (a FinetuningOptions) say, holding --output_dir (one run per directory); returns the best
    eval results. `data_settings` ({name: value}, a script's own flags: flags.script_settings)
    are recorded in run.json beside the options."""
    task.check_contract()
    options = _task_s_length(task, options)
    export_dir = options.export_dir
    if not (options.do_train or options.do_eval or options.do_predict or export_dir):
        raise ValueError("at least one of --do_train, --do_eval and --do_predict must be true")
    if export_dir and not task.exportable:
        raise ValueError(f"--export_dir: {task.name} has no export")
    # A mistyped file stops the run now, not after training.
    task.check_inputs([split for split, wanted in (
        ("train", options.do_train), ("dev", options.do_eval), ("test", options.do_predict))
        if wanted])
    check_flags(options)
    tool = f"{tool_name()} ({task.name})"
    with RunLock(options.output_dir, tool, chief=distribution.is_chief_task()) as lock:
        # (inside the lock: a live run's holder is named first)
        check_run_kind(options.output_dir, run_kind(task.name))
        if not options.do_train:
            _check_inference_lengths(options, data_settings)
        return _run(task, options, export_dir, lock, data_settings)


def _task_s_length(task, options):
    """The options with the task's max_seq_length where they left theirs at the default (the
    Python API names it for both); another one is refused: the features are cut at the task's,
    the batches padded and the run recorded at the options'."""
    if task.max_seq_length is None or task.max_seq_length == options.max_seq_length:
        return options
    if options.max_seq_length == FinetuningOptions.max_seq_length:
        return dataclasses.replace(options, max_seq_length=task.max_seq_length)
    raise ValueError(f"--max_seq_length={options.max_seq_length}, but the task cuts its "
                     f"examples at {task.max_seq_length}: give both the same")


def _check_inference_lengths(options, data_settings=None):
    """A rerun that only evaluates, predicts or exports is warned when it cuts examples with
    other lengths (flags.LENGTH_FLAGS) than the run in --output_dir trained with. (A resume
    names every changed setting: Trainer.)"""
    now = {**options.settings(), **(data_settings or {})}
    changed = changed_settings(options.output_dir,
                               {name: now[name] for name in LENGTH_FLAGS if name in now})
    if changed:
        logging.warning("Reading the examples with other lengths than the run in %s trained "
                        "with (run.json): %s; give the run's to read them as it did",
                        options.output_dir, ", ".join(changed))


def _run(task, options, export_dir, lock, data_settings):
    run = _Run(task, options, lock, data_settings)
    try:
        if options.do_train:
            run.train()
        elif options.do_eval:
            run.evaluate_saved()
        if run.best:
            write_eval_results(os.path.join(options.output_dir, "eval_results.txt"), run.best)
            if run.best_of:
                logging.info("%s = %.4g %s", task.best_metric, run.best[task.best_metric],
                             run.best_of)
            else:
                logging.info("Best %s = %.4g at step %d", task.best_metric,
                             run.best[task.best_metric], run.best["global_step"])
        if options.do_predict:
            run.predict()
        if export_dir:
            run.export(export_dir)
    finally:
        run.trainer.close()
    return run.best
