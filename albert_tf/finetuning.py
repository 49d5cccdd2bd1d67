"""What run_classifier, run_squad and run_race share: flags, encoder and tokenizer sources
(checkpoint or TF-Hub SavedModel), the feature cache, length-bucketed tf.data input, and the
train / evaluate-every-checkpoint / predict driver around `training.Trainer`.

A script hands `run_finetuning` a task object with:
  name, best_metric, higher_is_better (optional, default True), head_names (tuple)
  build_model(encoder)                  -> a model with the trainer's task protocol and
                                           `prediction_outputs(features, outputs)`
  train_features()                      -> features (see `Features` below)
  eval_sets()                           -> [(name, features)]; the first one selects the best
  eval_metrics(name, features, outputs) -> {original metric name: value}
  predict_sets()                        -> [(name, features)]
  write_predictions(name, features, outputs, output_dir)
  export(model, export_dir)             -> only with --export_dir (FLAGS.export_dir): writes
                                           the task's exports from the restored model
Features are a dict of numpy arrays: flat token arrays (SEQUENCE_KEYS) cut into examples by
`lengths`, plus one value per example (`label_ids`, ...; string arrays stay on the host).
Multiple choice: `lengths` [examples, choices] cuts each example into that many sequences,
which reach the model as [batch, choices, length].
Keys starting with `host_` (any shape, e.g. per-token maps for post-processing) also stay on
the host: they are cached but never fed to the model.
"""

import hashlib
import io
import json
import math
import os
import re

import keras
import numpy as np
import tensorflow as tf
from absl import flags, logging

from albert_tf import distribution
from albert_tf.config import AlbertConfig

SEQUENCE_KEYS = ("input_word_ids", "input_type_ids", "p_mask")
HOST_PREFIX = "host_"
CACHE_VERSION = 1
PADDINGS = ("bucket", "batch", "max_length")


# ---- flags ---------------------------------------------------------------------------------

def define_flags(max_seq_length=512, train_batch_size=32, eval_batch_size=8,
                 predict_batch_size=8, learning_rate=5e-5, train_step=1000,
                 save_checkpoints_steps=1000):
    """The original fine-tuning flags plus strategy, precision, padding and classifier_dropout;
    scripts pass the original's defaults for the numbers. Flags already defined (another script
    imported in the same process, as in tests) are left as they are."""
    S, B, I, F, E = (flags.DEFINE_string, flags.DEFINE_bool, flags.DEFINE_integer,
                     flags.DEFINE_float, flags.DEFINE_enum)
    _define(S, "data_dir", None, "Directory of the task's input files.")
    _define(S, "output_dir", None, "Checkpoints, eval_results.txt and predictions.")
    _define(S, "cached_dir", None, "Where feature caches live; default --output_dir.")
    _define(S, "albert_config_file", None,
            "albert_config.json; default: the config beside --init_checkpoint (or in the hub "
            "module's assets).")
    _define(S, "spm_model_file", None,
            "SentencePiece model. With --albert_hub_module_handle it may be omitted (or "
            "'from_tf_hub') to use the module's asset.")
    _define(S, "vocab_file", None, "Accepted for compatibility; ALBERT uses --spm_model_file.")
    _define(S, "init_checkpoint", None,
            "Initial weights: an original release, a Hugging Face directory or one of our "
            "checkpoints (pretraining or fine-tuned).")
    _define(S, "albert_hub_module_handle", None,
            "A TF2 SavedModel with the TF-Hub text-encoder API (path or handle), instead of "
            "--init_checkpoint.")
    _define(B, "do_lower_case", True, "Lowercase the text (uncased models).")
    _define(I, "max_seq_length", max_seq_length, "Longest sequence after tokenization.")
    _define(B, "do_train", False, "Fine-tune on the training split.")
    _define(B, "do_eval", False,
            "Evaluate every saved checkpoint on the dev split and keep the best as "
            "model.ckpt-best.")
    _define(B, "do_predict", False, "Predict the test split (from model.ckpt-best).")
    _define(I, "train_batch_size", train_batch_size, "Global training batch size.")
    _define(I, "eval_batch_size", eval_batch_size, "Global eval batch size.")
    _define(I, "predict_batch_size", predict_batch_size, "Global predict batch size.")
    _define(F, "learning_rate", learning_rate, "Peak learning rate.")
    _define(I, "train_step", train_step, "Training steps (global batches).")
    _define(F, "num_train_epochs", None, "If set, train this many epochs instead of --train_step.")
    _define(I, "warmup_step", 0, "Linear warmup steps.")
    _define(F, "warmup_proportion", None,
            "If set, warm up for this fraction of the training steps instead of --warmup_step.")
    _define(I, "save_checkpoints_steps", save_checkpoints_steps,
            "Steps between checkpoints (each is evaluated with --do_eval).")
    _define(I, "keep_checkpoint_max", 5, "Checkpoints kept besides model.ckpt-best.")
    _define(I, "iterations_per_loop", 1000,
            "Accepted for compatibility; see --steps_per_execution.")
    _define(I, "num_tpu_cores", 8, "Accepted for compatibility.")
    _define(E, "optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
    _define(F, "classifier_dropout", 0.1,
            "Dropout before the task head (the original hard-coded 0.1).")
    _define(E, "padding", "bucket", PADDINGS,
            "bucket: training batches grouped by length and every batch padded only to its "
            "longest sequence (rounded up to --pad_to_multiple_of); batch: the same without "
            "grouping; max_length: everything padded to --max_seq_length (the original; best on "
            "TPU).")
    _define(I, "pad_to_multiple_of", 16,
            "Round padded lengths up to this multiple, so that a bounded number of shapes is "
            "traced.")
    _define(I, "steps_per_execution", 1, "Training steps per tf.function call.")
    _define(I, "gradient_accumulation_steps", 1, "Micro-batches per step.")
    _define(I, "log_steps", 100, "Steps between progress lines.")
    _define(I, "random_seed", 12345, "Seed of initialisation, dropout and shuffling.")
    if "strategy" not in flags.FLAGS:
        distribution.define_flags()


def _define(define, name, *args, **kwargs):
    if name not in flags.FLAGS:
        define(name, *args, **kwargs)


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
    return int(train_step), int(warmup_step)


# ---- TF-Hub encoders and tokenizers -------------------------------------------------------

def resolve_hub_handle(handle):
    """A local SavedModel directory for a path or a TF-Hub handle."""
    if tf.io.gfile.isdir(handle):
        return handle
    import tensorflow_hub as hub
    return hub.resolve(handle)


def hub_tokenizer_info(handle):
    """(SentencePiece model path, do_lower_case) from a hub module's assets and variables."""
    path = resolve_hub_handle(handle)
    models = sorted(tf.io.gfile.glob(os.path.join(path, "assets", "*.model")))
    if not models:
        raise ValueError(f"the hub module {handle} has no SentencePiece model under assets/; "
                         f"pass --spm_model_file")
    do_lower_case = True
    try:
        reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
        for key in reader.get_variable_to_shape_map():
            if key.split("/")[0] == "do_lower_case":
                do_lower_case = bool(reader.get_tensor(key))
    except (tf.errors.NotFoundError, ValueError):
        pass
    return models[0], do_lower_case


def load_tokenizer(spm_model_file=None, do_lower_case=True, hub_module_handle=None):
    """FullTokenizer from --spm_model_file, or from the hub module's asset."""
    from albert_tf.tokenization import FullTokenizer
    if spm_model_file and spm_model_file != "from_tf_hub":
        if not tf.io.gfile.exists(spm_model_file):
            raise FileNotFoundError(f"--spm_model_file={spm_model_file} does not exist")
        return FullTokenizer(spm_model_file, do_lower_case)
    if hub_module_handle:
        model, hub_lower = hub_tokenizer_info(hub_module_handle)
        logging.info("Tokenizer from the hub module: %s (do_lower_case=%s)", model, hub_lower)
        return FullTokenizer(model, hub_lower)
    raise ValueError("--spm_model_file is required (or --albert_hub_module_handle with a "
                     "SentencePiece asset)")


def prepare(FLAGS, ignored_flags=(), why=""):  # noqa: N803 (absl's FLAGS object)
    """The scripts' common start: warn of flags they ignore, create --output_dir, and return
    the tokenizer from --spm_model_file or the hub module."""
    for name in ignored_flags:
        if FLAGS[name].value:
            logging.warning("--%s is ignored: %s", name, why)
    tokenizer = load_tokenizer(FLAGS.spm_model_file, FLAGS.do_lower_case,
                               FLAGS.albert_hub_module_handle)
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    return tokenizer


class HubEncoder(keras.layers.Layer):
    """A TF2 SavedModel with the TF-Hub text-encoder API as a trainable encoder layer.

    Its variables are tracked (and checkpointed) as `hub/<index>/<name>`; `config` is the
    module's assets/albert_config.json, the given config, or one inferred from a probe call.
    """

    def __init__(self, handle, config=None, **kwargs):
        kwargs.setdefault("name", "hub_encoder")
        super().__init__(**kwargs)
        self.handle = handle
        path = resolve_hub_handle(handle)
        self._module = tf.saved_model.load(path)
        if not callable(self._module):
            raise ValueError(f"the hub module {handle} is not callable; it needs the TF-Hub "
                             f"text-encoder API (a TF1 hub.Module is not supported)")
        self._names = {}
        trainable = {id(v) for v in getattr(self._module, "trainable_variables", [])}
        for i, v in enumerate(getattr(self._module, "variables", [])):
            name = f"hub/{i:04d}/{v.name.split(':')[0]}"
            wrapped = keras.Variable(v, trainable=id(v) in trainable, dtype=v.dtype,
                                     shape=v.shape, name=re.sub(r"[/:]", "_", v.name))
            self._track_variable(wrapped)
            self._names[name] = wrapped
        if not trainable:
            raise ValueError(f"the hub module {handle} exposes no trainable_variables")
        self.config = config or self._find_config(path)

    def _find_config(self, path):
        candidate = os.path.join(path, "assets", "albert_config.json")
        if tf.io.gfile.exists(candidate):
            return AlbertConfig.from_json_file(candidate)
        ids = tf.constant([[2, 3]], tf.int32)
        out = self.call({"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                         "input_type_ids": tf.zeros_like(ids)}, training=False)
        hidden = int(out["pooled_output"].shape[-1])
        logging.warning("the hub module %s has no assets/albert_config.json; the written "
                        "albert_config.json only records hidden_size=%d", self.handle, hidden)
        return AlbertConfig(vocab_size=1, hidden_size=hidden, num_attention_heads=1,
                            intermediate_size=hidden)

    def call(self, inputs, training=None):
        feed = {k: tf.cast(inputs[k], tf.int32)
                for k in ("input_word_ids", "input_mask", "input_type_ids")}
        outputs = self._module(feed, training=bool(training))
        return {"pooled_output": outputs["pooled_output"],
                "sequence_output": outputs["sequence_output"]}

    def tf1_weights(self):
        return dict(self._names)


def encoder_config(albert_config_file=None, init_checkpoint=None, output_dir=None):
    """The AlbertConfig from --albert_config_file, beside --init_checkpoint, or the one a
    previous run wrote to --output_dir."""
    from albert_tf.checkpoints import resolve_checkpoint
    config_file = albert_config_file
    if not config_file and init_checkpoint:
        config_file = resolve_checkpoint(init_checkpoint)[2]
    if not config_file and output_dir:
        candidate = os.path.join(output_dir, "albert_config.json")
        config_file = candidate if tf.io.gfile.exists(candidate) else None
    if not config_file:
        raise ValueError("--albert_config_file is required when --init_checkpoint has no "
                         "albert_config.json/config.json beside it and no "
                         "--albert_hub_module_handle is given")
    return AlbertConfig.from_json_file(config_file)


def encoder_factory(albert_config_file=None, init_checkpoint=None, hub_module_handle=None,
                    max_seq_length=None, output_dir=None):
    """A function that builds the encoder (call it under the strategy scope)."""
    if hub_module_handle:
        config = AlbertConfig.from_json_file(albert_config_file) if albert_config_file else None
        return lambda: HubEncoder(hub_module_handle, config)
    from albert_tf.modeling.encoder import AlbertEncoder
    config = encoder_config(albert_config_file, init_checkpoint, output_dir)
    if max_seq_length and max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={max_seq_length} exceeds the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    return lambda: AlbertEncoder(config, dtype=keras.mixed_precision.global_policy())


# ---- feature cache -----------------------------------------------------------------------

def file_digest(path, chunk=1 << 22):
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        while True:
            block = f.read(chunk)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def tokenizer_digest(tokenizer):
    return hashlib.sha256(tokenizer.sp_model.serialized_model_proto()).hexdigest()


def cache_key(**settings):
    """A short hash of every setting that changes the features."""
    text = json.dumps({"version": CACHE_VERSION, **settings}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_features(cache_dir, stem, settings, build_fn):
    """Features from `cache_dir/<stem>-<hash of settings>.npz`, built with build_fn() on a miss."""
    path = os.path.join(cache_dir, f"{stem}-{cache_key(**settings)}.npz")
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "rb") as f:
            with np.load(io.BytesIO(f.read()), allow_pickle=False) as data:
                logging.info("Features from cache %s", path)
                return {k: data[k] for k in data.files}
    features = build_fn()
    tf.io.gfile.makedirs(cache_dir)
    tmp = f"{path}.tmp-{os.getpid()}"
    buffer = io.BytesIO()
    np.savez(buffer, **features)
    with tf.io.gfile.GFile(tmp, "wb") as f:
        f.write(buffer.getvalue())
    tf.io.gfile.rename(tmp, path, overwrite=True)
    logging.info("Wrote %d examples to feature cache %s", len(features["lengths"]), path)
    return features


# ---- tf.data --------------------------------------------------------------------------------

def num_examples(features):
    return len(features["lengths"])


def _tensor_slices(features, pad_to=None):
    """(ragged sequences, per-example values) with example_index and is_real_example added;
    `pad_to` appends weight-0 copies of example 0 up to that many examples."""
    n = num_examples(features)
    lengths = features["lengths"].astype(np.int64)  # [n] or [n, choices]
    per_example = {k: v for k, v in features.items()
                   if k not in SEQUENCE_KEYS and k != "lengths" and v.dtype.kind not in "US"
                   and not k.startswith(HOST_PREFIX)}
    per_example["example_index"] = np.arange(n, dtype=np.int32)
    per_example["is_real_example"] = np.ones(n, np.float32)
    sequences = {k: features[k] for k in SEQUENCE_KEYS if k in features}
    extra = (pad_to or n) - n
    if extra > 0:
        first = int(lengths[0].sum())
        sequences = {k: np.concatenate([v, np.tile(v[:first], extra)])
                     for k, v in sequences.items()}
        lengths = np.concatenate([lengths, np.repeat(lengths[:1], extra, axis=0)])
        per_example = {k: np.concatenate([v, np.repeat(v[:1], extra, axis=0)])
                       for k, v in per_example.items()}
        per_example["example_index"][n:] = -1
        per_example["is_real_example"][n:] = 0.0
    ragged = {k: tf.RaggedTensor.from_row_lengths(v.astype(np.int32), lengths.reshape(-1))
              for k, v in sequences.items()}
    if lengths.ndim == 2:
        ragged = {k: tf.RaggedTensor.from_uniform_row_length(v, lengths.shape[1])
                  for k, v in ragged.items()}
    return tf.data.Dataset.from_tensor_slices((ragged, per_example))


def _merge(sequences, per_example):
    out = dict(per_example)
    mask = tf.ones_like(sequences["input_word_ids"])
    if isinstance(mask, tf.RaggedTensor):  # choices: pad each example to its longest choice
        sequences = {k: v.to_tensor() for k, v in sequences.items()}
        mask = mask.to_tensor()
    out.update(sequences)
    out["input_mask"] = mask
    return out


def _round_up_fn(multiple, max_seq_length):
    """Pads a batch's sequence axis up to a multiple (capped at max_seq_length) with zeros."""
    def fn(batch):
        length = tf.shape(batch["input_word_ids"])[-1]
        target = tf.minimum((length + multiple - 1) // multiple * multiple, max_seq_length)
        out = {}
        for k, v in batch.items():
            if k in SEQUENCE_KEYS or k == "input_mask":
                v = tf.pad(v, [[0, 0]] * (v.shape.rank - 1) + [[0, target - length]])
            out[k] = v
        return out
    return fn


def make_dataset(features, global_batch_size, max_seq_length, *, is_training,
                 input_context=None, padding="bucket", pad_to_multiple_of=16, seed=12345):
    """Per-replica batches for Trainer.train / predict.

    Training: shuffled, repeated, full batches; with padding="bucket" grouped by length.
    Eval/predict: every example once, in order, the last batches filled with weight-0 copies.
    Sequences are padded per batch (rounded up to `pad_to_multiple_of`), or to max_seq_length
    with padding="max_length".
    """
    if padding not in PADDINGS:
        raise ValueError(f"--padding={padding!r}: use one of {', '.join(PADDINGS)}")
    if int(features["lengths"].max()) > max_seq_length:
        raise ValueError(f"features hold sequences of {int(features['lengths'].max())} tokens, "
                         f"longer than max_seq_length={max_seq_length}")
    replicas = input_context.num_replicas_in_sync if input_context else 1
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    batch = global_batch_size // replicas
    n = num_examples(features)
    pad_to = None if is_training else math.ceil(n / global_batch_size) * global_batch_size
    dataset = _tensor_slices(features, pad_to).map(_merge)
    padded_length = max_seq_length if padding == "max_length" else None
    shapes = {k: spec.shape[:-1].as_list() + [padded_length]
              if k in SEQUENCE_KEYS or k == "input_mask" else []
              for k, spec in dataset.element_spec.items()}
    if is_training:
        if pipelines > 1:
            dataset = dataset.shard(pipelines, pipeline_id)
        dataset = dataset.shuffle(n, seed=seed, reshuffle_each_iteration=True).repeat()
        if padding == "bucket":
            m = pad_to_multiple_of
            boundaries = list(range(m + 1, max_seq_length + 1, m))
            dataset = dataset.bucket_by_sequence_length(
                lambda f: tf.shape(f["input_word_ids"])[-1], boundaries,
                [batch] * (len(boundaries) + 1), padded_shapes=shapes, drop_remainder=True)
        else:
            dataset = dataset.padded_batch(batch, padded_shapes=shapes, drop_remainder=True)
    else:
        dataset = dataset.padded_batch(batch, padded_shapes=shapes, drop_remainder=True)
        if pipelines > 1:
            dataset = dataset.shard(pipelines, pipeline_id)
    if padding != "max_length":
        dataset = dataset.map(_round_up_fn(pad_to_multiple_of, max_seq_length))
    return dataset.prefetch(tf.data.AUTOTUNE)


def real_outputs(outputs):
    """Trainer.predict outputs without the filler examples, sorted by example_index."""
    keep = outputs["is_real_example"] > 0
    order = np.argsort(outputs["example_index"][keep], kind="stable")
    return {k: v[keep][order] for k, v in outputs.items()}


# ---- the driver -------------------------------------------------------------------------------

def _saved_checkpoints(output_dir):
    state = tf.train.get_checkpoint_state(output_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    return [p if os.path.isabs(p) else os.path.join(output_dir, p) for p in paths]


def _predict_checkpoint(output_dir, init_checkpoint):
    best = os.path.join(output_dir, "model.ckpt-best")
    if tf.io.gfile.exists(best + ".index"):
        return best, True
    latest = tf.train.latest_checkpoint(output_dir)
    if latest:
        return latest, True
    return init_checkpoint, False


def _restore_for_inference(trainer, task, FLAGS, doing):
    """model.ckpt-best, else the latest checkpoint in output_dir, else --init_checkpoint."""
    path, ours = _predict_checkpoint(FLAGS.output_dir, FLAGS.init_checkpoint)
    if ours:
        trainer.restore(path)
    elif path:
        logging.warning("no fine-tuned checkpoint in %s; %s with %s (its task head may be "
                        "untrained)", FLAGS.output_dir, doing, path)
        trainer.model.load_checkpoint(path, allow_missing=tuple(task.head_names))
    else:
        logging.warning("no checkpoint to use for %s: the task head is untrained", doing)


def spm_model_path(spm_model_file=None, hub_module_handle=None):
    """The SentencePiece model file that `load_tokenizer` reads (an export copies it)."""
    if spm_model_file and spm_model_file != "from_tf_hub":
        return spm_model_file
    return hub_tokenizer_info(hub_module_handle)[0]


def _float32_copy(model, build):
    """The model rebuilt in float32 with the same weights: exports serve (and TFLite converts)
    in full precision whatever the training policy was."""
    policy = keras.mixed_precision.global_policy()
    if policy.name == "float32":
        return model
    keras.mixed_precision.set_global_policy("float32")
    try:
        copy = build()
    finally:
        keras.mixed_precision.set_global_policy(policy)
    copy.set_weights(model.get_weights())
    return copy


def command(main):
    """`main` for absl's app.run: drops the results dict that `main` returns (to tests), which
    absl would print and turn into exit status 1."""
    def run_main(argv):
        main(argv)
    return run_main


def run_finetuning(task, FLAGS):
    """Train, evaluate every checkpoint (keeping the best) and predict, as the flags say."""
    from albert_tf.optimization import create_optimizer
    from albert_tf.training import Trainer, write_eval_results

    export_dir = getattr(FLAGS, "export_dir", None)
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or export_dir):
        raise ValueError("at least one of --do_train, --do_eval and --do_predict must be true")
    if export_dir and not hasattr(task, "export"):
        raise ValueError(f"--export_dir: {task.name} has no export")
    keras.utils.set_random_seed(FLAGS.random_seed)
    strategy = distribution.get_strategy(FLAGS.strategy, FLAGS.use_tpu, FLAGS.tpu_name,
                                         FLAGS.tpu_zone, FLAGS.gcp_project, FLAGS.master)
    precision = distribution.resolve_precision(FLAGS.mixed_precision, strategy)
    logging.info("Mixed precision policy: %s", distribution.set_precision_policy(precision))
    make_encoder = encoder_factory(FLAGS.albert_config_file, FLAGS.init_checkpoint,
                                   FLAGS.albert_hub_module_handle, FLAGS.max_seq_length,
                                   FLAGS.output_dir)

    train_features = task.train_features() if FLAGS.do_train else None
    num_train_steps, num_warmup_steps = train_and_warmup_steps(
        num_examples(train_features) if train_features else 0, FLAGS.train_batch_size,
        FLAGS.train_step, FLAGS.num_train_epochs if FLAGS.do_train else None, FLAGS.warmup_step,
        FLAGS.warmup_proportion)

    def dataset_fn(features, batch, is_training):
        def fn(input_context):
            return make_dataset(features, batch, FLAGS.max_seq_length, is_training=is_training,
                                input_context=input_context, padding=FLAGS.padding,
                                pad_to_multiple_of=FLAGS.pad_to_multiple_of,
                                seed=FLAGS.random_seed)
        return fn

    trainer = Trainer(
        strategy, lambda: task.build_model(make_encoder()),
        lambda: create_optimizer(FLAGS.learning_rate, num_train_steps, num_warmup_steps,
                                 FLAGS.optimizer),
        FLAGS.output_dir, global_batch_size=FLAGS.train_batch_size,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        steps_per_execution=FLAGS.steps_per_execution, jit_compile=FLAGS.jit_compile,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max)
    eval_sets = task.eval_sets() if FLAGS.do_eval else []
    higher = getattr(task, "higher_is_better", True)
    best = {}

    def evaluate(path, step):
        results = {}
        for i, (name, features) in enumerate(eval_sets):
            outputs = real_outputs(trainer.predict(
                dataset_fn(features, FLAGS.eval_batch_size, False)))
            metrics = task.eval_metrics(name, features, outputs)
            prefix = "" if i == 0 else f"{name}_"
            results.update({prefix + k: float(v) for k, v in metrics.items()})
        results["global_step"] = step
        if trainer.record_eval(results, path, task.best_metric, higher) or not best:
            best.clear()
            best.update(results)

    try:
        if FLAGS.do_train:
            trainer.restore_or_initialize(FLAGS.init_checkpoint,
                                          allow_missing=tuple(task.head_names))
            logging.info("Training %d steps (%d warmup) on %d examples", num_train_steps,
                         num_warmup_steps, num_examples(train_features))
            trainer.train(dataset_fn(train_features, FLAGS.train_batch_size, True),
                          num_train_steps, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
                          log_steps=FLAGS.log_steps,
                          on_checkpoint=evaluate if FLAGS.do_eval else None)
        elif FLAGS.do_eval:
            checkpoints = _saved_checkpoints(FLAGS.output_dir)
            if not checkpoints:
                raise ValueError(f"--do_eval without --do_train needs checkpoints in "
                                 f"--output_dir={FLAGS.output_dir}")
            for path in checkpoints:
                trainer.restore(path)
                evaluate(path, trainer.step)
        if best:
            write_eval_results(os.path.join(FLAGS.output_dir, "eval_results.txt"), best)
            logging.info("Best %s = %.4g at step %d", task.best_metric, best[task.best_metric],
                         best["global_step"])
        if FLAGS.do_predict:
            _restore_for_inference(trainer, task, FLAGS, "predicting")
            for name, features in task.predict_sets():
                outputs = real_outputs(trainer.predict(
                    dataset_fn(features, FLAGS.predict_batch_size, False)))
                task.write_predictions(name, features, outputs, FLAGS.output_dir)
        if export_dir:
            _restore_for_inference(trainer, task, FLAGS, "exporting")
            task.export(_float32_copy(trainer.model, lambda: task.build_model(make_encoder())),
                        export_dir)
    finally:
        trainer.close()
    return best
