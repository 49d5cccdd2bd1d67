r"""ALBERT pretraining (MLM + sentence-order prediction) with the original flags.

  python -m albert_tf.run_pretraining --albert_config_file=configs/albert_base_v2.json \
      --input_file='data/train-*.tfrecord' --spm_model_file=vocab/30k-clean.model \
      --output_dir=out --train_batch_size=4096 --num_train_steps=125000 \
      --num_warmup_steps=3125 --learning_rate=0.00176

Rerunning the same command after a crash resumes from the last checkpoint in --output_dir.
The library behind it: `albert_tf.training.trainer.Trainer`, `albert_tf.data.pipeline`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import dataclasses

import keras
from absl import app, flags, logging

from albert_tf import cli
from albert_tf.data.pipeline import (check_records, count_records, expand_file_patterns,
                                     pretraining_dataset, records_casing, swapped_share)
from albert_tf.data.service import check_dispatcher
from albert_tf.formats.resolve import vocabularies_beside
from albert_tf.formats.tokenizers import load_tokenizer
from albert_tf.modeling.optimizers import create_optimizer
from albert_tf.modeling.pretrainer import AlbertPretrainer
from albert_tf.tasks.driver import encoder_config
from albert_tf.tasks.flags import define_fields, define_if_missing
from albert_tf.tasks.options import PretrainingOptions
from albert_tf.tokenization.loader import open_vocabulary
from albert_tf.training import distribution, excursions
from albert_tf.training.checkpoint_files import (check_run_config, check_run_kind,
                                                 resumable_checkpoints, run_directory_of)
from albert_tf.training.run_lock import RunLock
from albert_tf.training.step_memory import StepShape
from albert_tf.training.trainer import Trainer
from albert_tf.training.trainer_options import TrainerOptions

FLAGS = flags.FLAGS
# The original's defaults. run() makes them the defaults even where another script in this
# process (tests) defined the names it shares first.
PRETRAINING_DEFAULTS = {}


def _define(define, name, default, *args, **kwargs):
    PRETRAINING_DEFAULTS[name] = default
    define_if_missing(define, name, default, *args, **kwargs)


def define_flags():
    """run_pretraining's flags, one for each field of PretrainingOptions, where missing (a tool
    run in a process with its own flags defines them all afresh)."""
    define_fields([f for f in dataclasses.fields(PretrainingOptions)
                   if not f.metadata["defined_by"]], _define)
    excursions.define_flags(_define, "recover")
    if "strategy" not in FLAGS:
        distribution.define_flags()


define_flags()


def _dataset_fn(options, patterns, global_batch, is_training, flag, vocab_size, mask_id):
    service = options.data_service_address if is_training else None

    def fn(input_context, start_batch=0):
        return pretraining_dataset(
            patterns, input_context.get_per_replica_batch_size(global_batch),
            options.max_seq_length, options.max_predictions_per_seq, is_training=is_training,
            input_context=input_context, seed=options.random_seed, flag=flag,
            dynamic_masking=options.dynamic_masking, vocab_size=vocab_size,
            masked_lm_prob=options.masked_lm_prob, ngram=options.ngram,
            favor_shorter_ngram=options.favor_shorter_ngram, mask_id=mask_id,
            data_service=service, start_batch=start_batch,
            data_service_timeout=options.data_service_timeout)
    # Named if a record is corrupt or holds ids outside the vocabulary.
    fn.input_files, fn.vocab_size = expand_file_patterns(patterns, flag), vocab_size
    fn.data_service, fn.data_service_timeout = service, options.data_service_timeout
    return fn


def _checked_config(options):
    """The model's config, after the checks of the flags that need no other file."""
    if not (options.do_train or options.do_eval):
        raise app.UsageError("at least one of --do_train and --do_eval must be true")
    if options.do_train and options.num_warmup_steps > options.num_train_steps:
        raise app.UsageError(f"--num_warmup_steps={options.num_warmup_steps} exceeds "
                             f"--num_train_steps={options.num_train_steps}")
    config = encoder_config(options.albert_config_file, options.init_checkpoint,
                            options.output_dir, missing=(
                                "--albert_config_file is required: the config of the model to "
                                "pretrain (configs/ holds the releases'), unless "
                                "--init_checkpoint has one beside it"))
    if not options.albert_config_file:
        logging.info("No --albert_config_file: the config of %s", options.init_checkpoint or
                     f"the run in {options.output_dir}")
    if options.max_seq_length > config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length={options.max_seq_length} exceeds the config's "
                             f"max_position_embeddings={config.max_position_embeddings}")
    if options.dynamic_masking and not 0 < options.masked_lm_prob <= 1:
        raise app.UsageError(f"--masked_lm_prob={options.masked_lm_prob} must be within (0, 1]: "
                             f"0 masks no token, so the run would learn no MLM")
    return config


def _tokenizer_and_mask_id(options, config, mask_token_given):
    """The tokenizer of --spm_model_file / --vocab_file, else the one beside --init_checkpoint
    (None without either), and --mask_token_id or that vocabulary's [MASK] (an id given on the
    command line that differs from the vocabulary's is an error; the vocabulary may not be
    larger than vocab_size, nor, given by a flag, another than --init_checkpoint's)."""
    named = bool(options.spm_model_file or options.vocab_file)
    beside = options.init_checkpoint and run_directory_of(options.init_checkpoint)
    carrier = options.init_checkpoint if beside and vocabularies_beside(beside) else None
    if named or carrier:
        tokenizer = load_tokenizer(options.spm_model_file, options.do_lower_case,
                                   vocab_file=options.vocab_file, model=carrier,
                                   vocab_size=config.vocab_size)
        if not named:
            logging.info("The vocabulary beside --init_checkpoint: %s (kept beside the "
                         "checkpoints)", tokenizer.asset_file)
        mask_id = tokenizer.special_ids()["[MASK]"]
        if mask_token_given and options.mask_token_id != mask_id:
            raise app.UsageError(f"--mask_token_id={options.mask_token_id} but [MASK] is "
                                 f"{mask_id} in {tokenizer.asset_file}")
        return tokenizer, mask_id
    logging.warning("no --spm_model_file or --vocab_file%s: the checkpoints in %s will carry no "
                    "vocabulary, so predict and the fine-tuning scripts will need it given; pass "
                    "the one the records were made with to keep it beside them",
                    ", and none beside --init_checkpoint" if options.init_checkpoint else "",
                    options.output_dir)
    return None, options.mask_token_id


def main(_):
    options = PretrainingOptions.from_flags(FLAGS)
    # Whether --mask_token_id was given, not defaulted: only a given id must match the
    # vocabulary's [MASK].
    _pretrain(options, FLAGS["mask_token_id"].present)


def _pretrain(options, mask_token_given):
    """Checks the options, the config and the records, then trains and evaluates."""
    config = _checked_config(options)
    tokenizer, mask_id = _tokenizer_and_mask_id(options, config, mask_token_given)
    if options.dynamic_masking and not 0 <= mask_id < config.vocab_size:
        raise app.UsageError(f"--mask_token_id={mask_id} is outside the config's "
                             f"vocab_size={config.vocab_size}")
    eval_files = options.eval_input_file or options.input_file
    inputs = [(flag, expand_file_patterns(patterns, flag)) for flag, patterns, used in (
        ("input_file", options.input_file, options.do_train),
        ("eval_input_file", eval_files, options.do_eval)) if used]
    if options.data_service_address and options.do_train:
        check_dispatcher(options.data_service_address)
    keras.utils.set_random_seed(options.random_seed)
    # The strategy first: a multi-worker one must be set up before TensorFlow runs any op.
    strategy, jit_compile, step_kernels = distribution.setup(**options.distribution())
    distribution.check_batch_sizes(
        strategy, options.train_batch_size, options.gradient_accumulation_steps,
        eval_batch_size=options.eval_batch_size if options.do_eval else None)
    fingerprints = {}
    for flag, files in inputs:
        fingerprints.update(check_records(files, options.max_seq_length,
                                          options.max_predictions_per_seq, config.vocab_size,
                                          flag))
        logging.info("--%s: %d file%s (%s%s)", flag, len(files), "" if len(files) == 1 else "s",
                     ", ".join(files[:3]), ", ..." if len(files) > 3 else "")
    tokenizer = _cased_as_built(options, tokenizer, fingerprints, [flag for flag, _ in inputs])
    files = dict(inputs)
    trained_on = set(files.get("eval_input_file", ())) & set(files.get("input_file", ()))
    if options.eval_input_file and trained_on:
        logging.warning("--eval_input_file's %s %s among --input_file's: the held-out metrics "
                        "(and model.ckpt-best) are of records it trains on; leave them out of "
                        "--input_file's glob", ", ".join(sorted(trained_on)),
                        "is" if len(trained_on) == 1 else "are")
    eval_examples = _eval_examples(options, inputs[-1][1]) if options.do_eval else None
    sop_baseline = _sop_baseline(inputs[-1][1], eval_examples) if eval_examples else None
    with RunLock(options.output_dir, "run_pretraining",
                 chief=distribution.is_chief(strategy)) as lock:
        check_run_kind(options.output_dir, "pretraining")
        trainer = _trainer(options, config, tokenizer, strategy, jit_compile, step_kernels, lock)
        _train_and_evaluate(options, trainer, config.vocab_size, mask_id, eval_files,
                            eval_examples, sop_baseline)


def _cased_as_built(options, tokenizer, fingerprints, flags_read):
    """The tokenizer with the lower-casing the records were built with, where they say
    (records_casing), so that the checkpoints carry it; a --do_lower_case that differs is
    refused."""
    if tokenizer is None:
        return None
    lower = records_casing(fingerprints, tokenizer, " / --".join(flags_read))
    if lower is None:
        return tokenizer
    if options.do_lower_case is not None and options.do_lower_case != lower:
        raise app.UsageError(f"--do_lower_case={options.do_lower_case}, but the records were "
                             f"built with --do_lower_case={lower}: drop the flag, or rebuild "
                             f"the records with it")
    if lower == tokenizer.do_lower_case:
        return tokenizer
    logging.info("The records were built with --do_lower_case=%s: %s is read (and kept beside "
                 "the checkpoints) that way", lower, tokenizer.asset_file)
    return open_vocabulary(tokenizer.asset_file, lower)


def _eval_examples(options, files):
    """How many records each evaluation reads (whole batches only, as the original); refuses
    eval data that holds less than one batch."""
    flag = "--eval_input_file" if options.eval_input_file else "--input_file"
    batch, steps = options.eval_batch_size, options.max_eval_steps
    held = count_records(files, steps * batch + 1 if steps else None)
    if held is None:
        return None
    if held < batch:
        raise app.UsageError(f"{flag} holds {held} records, fewer than --eval_batch_size={batch}:"
                             f" evaluation reads whole batches, so it would read none. Lower "
                             f"--eval_batch_size to at most {held}")
    if steps and held > steps * batch:
        logging.info("Each evaluation reads --max_eval_steps=%d batches of %d records from %s",
                     steps, batch, flag)
        return steps * batch
    left = held % batch
    logging.info("Each evaluation reads the %d records of %s%s", held - left, flag,
                 f", leaving out the last {left} of its {held}: whole batches of "
                 f"--eval_batch_size={batch} only" if left else "")
    return held - left


def _sop_baseline(files, count):
    """The held-out sentence_order_accuracy of a model that always answers the more common
    order, logged as the mark that SOP has learned something."""
    swapped = swapped_share(files, count)
    baseline = max(swapped, 1 - swapped)
    logging.info("Held-out sentence order: %.1f%% of the %d pairs are swapped: answering the "
                 "more common order alone scores sentence_order_accuracy %.4g", 100 * swapped,
                 count, baseline)
    return baseline


def _trainer(options, config, tokenizer, strategy, jit_compile, step_kernels, lock):
    return Trainer(
        strategy, lambda: AlbertPretrainer(config, options.sop_weight, step_kernels),
        lambda: create_optimizer(options.learning_rate, options.num_train_steps,
                                 options.num_warmup_steps, options.optimizer,
                                 poly_power=options.poly_power,
                                 start_warmup_step=options.start_warmup_step,
                                 bias_correction=options.bias_correction),
        options.output_dir, TrainerOptions(
            global_batch_size=options.train_batch_size,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            steps_per_execution=options.steps_per_execution, jit_compile=jit_compile,
            save_checkpoints_steps=options.save_checkpoints_steps, log_steps=options.log_steps,
            keep_checkpoint_max=options.keep_checkpoint_max, run_kind="pretraining",
            run_settings=options.settings(),
            tokenizer=tokenizer, run_lock=lock, excursions=options.excursions(),
            step_shape=StepShape(options.max_seq_length, options.max_predictions_per_seq,
                                 last_block_rows=options.max_predictions_per_seq + 1),
            step_kernels=step_kernels))


def _restore_to_evaluate(options, trainer):
    """The newest intact checkpoint in --output_dir, restored (nothing trains: the run's
    training settings are not compared)."""
    candidates = resumable_checkpoints(options.output_dir)
    if not candidates:
        raise app.UsageError(f"--do_eval without --do_train needs a checkpoint in "
                             f"--output_dir={options.output_dir}")
    check_run_config(options.output_dir, trainer.model.config)
    return trainer.saver.restore_newest_intact(candidates, trainer.restore)


def _train_and_evaluate(options, trainer, vocab_size, mask_id, eval_files, eval_examples,
                        sop_baseline=None):
    if options.do_train:
        trainer.restore_or_initialize(options.init_checkpoint, options.init_from_group0,
                                      allow_missing=("cls/",))
        if trainer.step == 0 and not options.init_checkpoint:
            logging.info("Pretraining from random weights (no --init_checkpoint)")
    else:
        restored = _restore_to_evaluate(options, trainer)
    eval_fn = _dataset_fn(options, eval_files, options.eval_batch_size, False,
                          "eval_input_file", vocab_size, mask_id)

    def evaluate(path, step):
        result = trainer.evaluate(eval_fn, options.max_eval_steps)
        trainer.record_eval(result, path, "masked_lm_accuracy", examples=eval_examples)
        accuracy = result["sentence_order_accuracy"]
        if sop_baseline is not None and abs(accuracy - sop_baseline) < 0.5 / eval_examples:
            logging.warning("sentence_order_accuracy %.4g at step %d equals the share of the "
                            "more common order: the SOP head likely answers one order whatever "
                            "the pair (not learned yet)", accuracy, step)
        # The MLM loss: on a small corpus the held-out SOP loss rises as SOP fits the training
        # pairs while MLM still improves (docs/pretraining.md, "Loss excursions").
        trainer.observe_eval(step, result["masked_lm_loss"])

    try:
        if options.do_train:
            trainer.train(_dataset_fn(options, options.input_file, options.train_batch_size,
                                      True, "input_file", vocab_size, mask_id),
                          options.num_train_steps,
                          on_checkpoint=evaluate if options.do_eval else None,
                          evaluate_restarts=options.do_eval)
        else:
            evaluate(restored, trainer.step)
    finally:
        trainer.close()


def run(argv=None):
    define_flags()
    for name, value in PRETRAINING_DEFAULTS.items():
        FLAGS.set_default(name, value)
    cli.run(main, ["input_file", "output_dir"], argv)


if __name__ == "__main__":
    run()
