"""ALBERT pretraining (MLM + sentence-order prediction) with the original flags.

  python -m albert_tf.run_pretraining --albert_config_file=configs/albert_base_v2.json \
      --input_file='data/train-*.tfrecord' --output_dir=out --train_batch_size=4096 \
      --num_train_steps=125000 --num_warmup_steps=3125 --learning_rate=0.00176

Rerunning the same command after a crash resumes from the last checkpoint in --output_dir.
The library behind it: `albert_tf.training.trainer.Trainer`, `albert_tf.data.pipeline`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import dataclasses

import keras
from absl import app, flags

from albert_tf import cli
from albert_tf.modeling.optimizers import OPTIMIZER_NAMES
from albert_tf.tasks.flags import define_fields, define_if_missing
from albert_tf.tasks.options import POSITIVE, LoopOptions
from albert_tf.training import distribution, excursions
from albert_tf.training.checkpoint_files import check_run_kind
from albert_tf.training.run_lock import RunLock

FLAGS = flags.FLAGS
# The original's defaults. run() makes them the defaults even where another script in this
# process (tests) defined the names it shares first.
PRETRAINING_DEFAULTS = {}


def _define(define, name, default, *args, **kwargs):
    PRETRAINING_DEFAULTS[name] = default
    define_if_missing(define, name, default, *args, **kwargs)


def define_flags():
    """The original run_pretraining flags plus ours, where missing (a tool run in a process
    with its own flags defines them all afresh)."""
    S, B, I, F, E = (flags.DEFINE_string, flags.DEFINE_bool, flags.DEFINE_integer,
                     flags.DEFINE_float, flags.DEFINE_enum)
    _define(S, "albert_config_file", None, "albert_config.json of the model to train.")
    _define(S, "input_file", None, "Training TFRecords: comma-separated globs.")
    _define(S, "eval_input_file", None,
            "Held-out TFRecords for --do_eval; defaults to --input_file (the original evaluated on "
            "its training files).")
    _define(S, "output_dir", None, "Checkpoints, summaries and eval_results.txt.")
    _define(S, "init_checkpoint", None,
            "Initial weights: an original release, a Hugging Face directory, one of our "
            "checkpoints or a model's name (docs/models.md). Ignored when --output_dir already "
            "holds a checkpoint.")
    _define(I, "max_seq_length", 512, "Sequence length of the records.", lower_bound=1)
    _define(I, "max_predictions_per_seq", 20, "Masked positions per record.", lower_bound=1)
    _define(B, "do_train", True, "Train.")
    _define(B, "do_eval", False, "Evaluate (after each checkpoint when training).")
    _define(I, "train_batch_size", 4096, "Global training batch size.", lower_bound=1)
    _define(I, "eval_batch_size", 64, "Global eval batch size.", lower_bound=1)
    _define(E, "optimizer", "lamb", list(OPTIMIZER_NAMES), "Optimizer.")
    _define(B, "bias_correction", False,
            "Adam's bias correction of the moment estimates (the original had none; with LAMB "
            "it changes only the LayerNorm and bias updates, docs/pretraining.md).")
    _define(F, "learning_rate", 0.00176, "Peak learning rate.", validator=POSITIVE)
    _define(F, "poly_power", 1.0, "Power of the polynomial decay.")
    _define(I, "num_train_steps", 125000, "Training steps (global batches).", lower_bound=1)
    _define(I, "num_warmup_steps", 3125, "Linear warmup steps.", lower_bound=0)
    _define(I, "start_warmup_step", 0, "Step at which the warmup starts.", lower_bound=0)
    _define(I, "max_eval_steps", 100, "Eval batches per evaluation.", lower_bound=0)
    _define(B, "init_from_group0", False,
            "Initialise groups missing from --init_checkpoint from group 0 (warm start of a deeper "
            "or more-grouped model).")
    _define(F, "sop_weight", 1.0, "Weight of the SOP loss; 0 trains MLM only.", lower_bound=0)
    _define(B, "dynamic_masking", False,
            "Draw new masks for every batch from the records' token_boundary (the original n-gram "
            "rule) instead of using the records' static masks.")
    _define(F, "masked_lm_prob", 0.15, "With --dynamic_masking: masked fraction of tokens.",
            validator=(lambda v: 0 < v <= 1, "must be in (0, 1]"))
    _define(I, "ngram", 3, "With --dynamic_masking: longest masked span, in words.", lower_bound=1)
    _define(B, "favor_shorter_ngram", True,
            "With --dynamic_masking: p(n) ∝ 1/n; False reverses the array.")
    _define(I, "mask_token_id", 4, "With --dynamic_masking: the id of [MASK] (default: the "
            "vocabulary's, when --spm_model_file or --vocab_file is given; else 4).")
    _define(S, "data_service_address", None,
            "host:port of a tf.data service dispatcher (python -m albert_tf.data_service): its "
            "workers read and mask the training batches, the same batches as in-process.")
    _define(F, "data_service_timeout", 600.0,
            "With --data_service_address: seconds to wait for every worker at the start, and "
            "for a training step before the run stops with the service named.",
            validator=POSITIVE)
    _define(S, "spm_model_file", None, "Optional SentencePiece model of the records: checked against "
            "vocab_size; with --dynamic_masking its [MASK] id is used.")
    _define(S, "vocab_file", None, "Optional WordPiece vocabulary of the records (the Chinese "
            "releases' vocab_chinese.txt), instead of --spm_model_file.")
    define_fields(dataclasses.fields(LoopOptions), _define, save_checkpoints_steps=5000)
    excursions.define_flags(_define, "recover")
    if "strategy" not in FLAGS:
        distribution.define_flags()


define_flags()


def _dataset_fn(patterns, global_batch, is_training, flag, vocab_size=None, mask_id=None):
    from albert_tf.data.pipeline import expand_file_patterns, pretraining_dataset

    service = FLAGS.data_service_address if is_training else None

    def fn(input_context, start_batch=0):
        return pretraining_dataset(
            patterns, input_context.get_per_replica_batch_size(global_batch),
            FLAGS.max_seq_length, FLAGS.max_predictions_per_seq, is_training=is_training,
            input_context=input_context, seed=FLAGS.random_seed, flag=flag,
            dynamic_masking=FLAGS.dynamic_masking, vocab_size=vocab_size,
            masked_lm_prob=FLAGS.masked_lm_prob, ngram=FLAGS.ngram,
            favor_shorter_ngram=FLAGS.favor_shorter_ngram, mask_id=mask_id,
            data_service=service, start_batch=start_batch,
            data_service_timeout=FLAGS.data_service_timeout)
    # Named if a record is corrupt or holds ids outside the vocabulary.
    fn.input_files, fn.vocab_size = expand_file_patterns(patterns, flag), vocab_size
    fn.data_service, fn.data_service_timeout = service, FLAGS.data_service_timeout
    return fn


def _tokenizer_and_mask_id(config):
    """The tokenizer of --spm_model_file / --vocab_file (None without them) and --mask_token_id
    or that vocabulary's [MASK] (a given id that differs from the vocabulary's is an error; the
    vocabulary may not be larger than vocab_size)."""
    if FLAGS.spm_model_file or FLAGS.vocab_file:
        from albert_tf.formats.tokenizers import load_tokenizer
        tokenizer = load_tokenizer(FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
                                   vocab_size=config.vocab_size)
        mask_id = tokenizer.special_ids()["[MASK]"]
        if FLAGS["mask_token_id"].present and FLAGS.mask_token_id != mask_id:
            raise app.UsageError(f"--mask_token_id={FLAGS.mask_token_id} but [MASK] is "
                                 f"{mask_id} in {tokenizer.asset_file}")
        return tokenizer, mask_id
    return None, FLAGS.mask_token_id


def main(_):
    from albert_tf import AlbertConfig
    from albert_tf.data.pipeline import check_records, expand_file_patterns
    from albert_tf.data.service import check_dispatcher

    if not (FLAGS.do_train or FLAGS.do_eval):
        raise app.UsageError("at least one of --do_train and --do_eval must be true")
    if FLAGS.do_train and FLAGS.num_warmup_steps > FLAGS.num_train_steps:
        raise app.UsageError(f"--num_warmup_steps={FLAGS.num_warmup_steps} exceeds "
                             f"--num_train_steps={FLAGS.num_train_steps}")
    config = AlbertConfig.from_json_file(FLAGS.albert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise app.UsageError(f"--max_seq_length={FLAGS.max_seq_length} exceeds the config's "
                             f"max_position_embeddings={config.max_position_embeddings}")
    if FLAGS.dynamic_masking and not 0 < FLAGS.masked_lm_prob <= 1:
        raise app.UsageError(f"--masked_lm_prob={FLAGS.masked_lm_prob} must be within (0, 1]: "
                             f"0 masks no token, so the run would learn no MLM")
    tokenizer, mask_id = _tokenizer_and_mask_id(config)
    if FLAGS.dynamic_masking and not 0 <= mask_id < config.vocab_size:
        raise app.UsageError(f"--mask_token_id={mask_id} is outside the config's "
                             f"vocab_size={config.vocab_size}")
    eval_files = FLAGS.eval_input_file or FLAGS.input_file
    inputs = [(flag, expand_file_patterns(patterns, flag)) for flag, patterns, used in (
        ("input_file", FLAGS.input_file, FLAGS.do_train),
        ("eval_input_file", eval_files, FLAGS.do_eval)) if used]
    if FLAGS.data_service_address and FLAGS.do_train:
        check_dispatcher(FLAGS.data_service_address)
    keras.utils.set_random_seed(FLAGS.random_seed)
    # The strategy first: a multi-worker one must be set up before TensorFlow runs any op.
    strategy, jit_compile, step_kernels = distribution.setup(
        **{name: FLAGS[name].value for name in distribution.FLAG_NAMES})
    distribution.check_batch_sizes(strategy, FLAGS.train_batch_size,
                                   FLAGS.gradient_accumulation_steps,
                                   eval_batch_size=FLAGS.eval_batch_size if FLAGS.do_eval else None)
    for flag, files in inputs:
        check_records(files, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                      config.vocab_size, flag)
    with RunLock(FLAGS.output_dir, "run_pretraining", chief=distribution.is_chief(strategy)) as lock:
        check_run_kind(FLAGS.output_dir, "pretraining")
        _train_and_evaluate(config, tokenizer, mask_id, eval_files, strategy, jit_compile,
                            step_kernels, lock)


def _train_and_evaluate(config, tokenizer, mask_id, eval_files, strategy, jit_compile,
                        step_kernels, lock):
    from albert_tf import AlbertPretrainer
    from albert_tf.modeling.optimizers import create_optimizer
    from albert_tf.training.trainer import Trainer
    from albert_tf.training.trainer_options import TrainerOptions

    trainer = Trainer(
        strategy, lambda: AlbertPretrainer(config, FLAGS.sop_weight, step_kernels),
        lambda: create_optimizer(FLAGS.learning_rate, FLAGS.num_train_steps,
                                 FLAGS.num_warmup_steps, FLAGS.optimizer,
                                 poly_power=FLAGS.poly_power,
                                 start_warmup_step=FLAGS.start_warmup_step,
                                 bias_correction=FLAGS.bias_correction),
        FLAGS.output_dir, TrainerOptions(
            global_batch_size=FLAGS.train_batch_size,
            gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
            steps_per_execution=FLAGS.steps_per_execution, jit_compile=jit_compile,
            save_checkpoints_steps=FLAGS.save_checkpoints_steps, log_steps=FLAGS.log_steps,
            keep_checkpoint_max=FLAGS.keep_checkpoint_max, run_kind="pretraining",
            tokenizer=tokenizer, run_lock=lock,
            excursions=excursions.settings_from_flags(FLAGS)))
    restored = trainer.restore_or_initialize(FLAGS.init_checkpoint, FLAGS.init_from_group0,
                                             allow_missing=("cls/",))

    eval_fn = _dataset_fn(eval_files, FLAGS.eval_batch_size, False, "eval_input_file",
                          config.vocab_size, mask_id)

    def evaluate(path, step):
        result = trainer.evaluate(eval_fn, FLAGS.max_eval_steps)
        trainer.record_eval(result, path, "masked_lm_accuracy")
        # The MLM loss: on a small corpus the held-out SOP loss rises as SOP fits the training
        # pairs while MLM still improves (docs/pretraining.md, "Loss excursions").
        trainer.observe_eval(step, result["masked_lm_loss"])

    try:
        if FLAGS.do_train:
            trainer.train(_dataset_fn(FLAGS.input_file, FLAGS.train_batch_size, True,
                                      "input_file", config.vocab_size, mask_id),
                          FLAGS.num_train_steps,
                          on_checkpoint=evaluate if FLAGS.do_eval else None,
                          evaluate_restarts=FLAGS.do_eval)
        elif FLAGS.do_eval:
            if restored is None:
                raise app.UsageError(f"--do_eval without --do_train needs a checkpoint in "
                                     f"--output_dir={FLAGS.output_dir}")
            evaluate(restored, trainer.step)
    finally:
        trainer.close()


def run(argv=None):
    define_flags()
    for name, value in PRETRAINING_DEFAULTS.items():
        FLAGS.set_default(name, value)
    cli.run(main, ["albert_config_file", "input_file", "output_dir"], argv)


if __name__ == "__main__":
    run()
