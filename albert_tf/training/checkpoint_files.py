"""The run's checkpoint files in output_dir: which can resume a run, whether the run's config
matches, and dropout's random state saved with them."""

import dataclasses
import json
import os
import re

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.data.records import short_tf_message
from albert_tf.files import write_json
from albert_tf.formats.checkpoints import write_checkpoint_index

CHECKPOINT_NAME = "model.ckpt"
RUN_FILE = "run.json"  # the kind of run the directory's checkpoints belong to, its settings
# The settings that say where a run starts from: a resume goes on from its own checkpoints.
START_ONLY = ("init_checkpoint", "albert_hub_module_handle")

# What reading a damaged checkpoint raises: missing or truncated files, failed checksums.
UNREADABLE = (tf.errors.OpError, IndexError, OSError)


def unreadable_reason(error):
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return short_tf_message(message.splitlines()[0])


def listdir(directory):
    return sorted(tf.io.gfile.listdir(directory)) if tf.io.gfile.isdir(directory) else []


def resumable_checkpoints(directory):
    """[(step, prefix)] of the trainer's checkpoints in `directory`, newest first: those its
    `checkpoint` index lists (whether or not their files are there) and every
    model.ckpt-<step>.index beside them (when the index itself is missing or stale)."""
    found = {}
    try:
        state = tf.train.get_checkpoint_state(directory)
    except (tf.errors.OpError, ValueError) as e:  # an unreadable index: the files decide
        logging.warning("%s/checkpoint cannot be read (%s)", directory, e)
        state = None
    listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path] if state else []
    pattern = re.compile(re.escape(CHECKPOINT_NAME) + r"-(\d+)$")
    for path in listed + [n[:-len(".index")] for n in listdir(directory) if n.endswith(".index")]:
        name = os.path.basename(path)
        match = pattern.match(name)
        if match:
            found[int(match.group(1))] = os.path.join(directory, name)
    return sorted(found.items(), reverse=True)


def checkpoints_on_disk(directory):
    """{step: prefix} of the trainer's checkpoints in `directory` whose files are there."""
    return {step: prefix for step, prefix in resumable_checkpoints(directory)
            if tf.io.gfile.exists(prefix + ".index")}


def drop_checkpoints(directory, steps):
    """Removes these checkpoints; the `checkpoint` index lists the others, written first so
    that it never lists a removed one."""
    listed = checkpoints_on_disk(directory)
    kept = [listed[s] for s in sorted(listed) if s not in steps]
    if kept:
        write_checkpoint_index(directory, kept)
    for step in steps:
        prefix = os.path.join(directory, f"{CHECKPOINT_NAME}-{step}")
        for path in tf.io.gfile.glob(prefix + ".data-*") + tf.io.gfile.glob(prefix + ".index"):
            tf.io.gfile.remove(path)


def prune_checkpoints(directory, keep_max, anchors):
    """Keeps the newest `keep_max` checkpoints (0: all) and, for each anchor step, the newest
    checkpoint at or before it (what a loss-excursion recovery goes back to)."""
    steps = sorted(checkpoints_on_disk(directory))
    keep = set(steps[-keep_max:] if keep_max else steps)
    for anchor in anchors:
        keep.update([s for s in steps if s <= anchor][-1:])
    drop_checkpoints(directory, [s for s in steps if s not in keep])


def check_run_config(output_dir, config, settings=None):
    """A run resumes only with the config it started with (the weights are shared across
    layers, so another depth would load without complaint), and says which of its `settings`
    (options) differ from those it started with."""
    path = os.path.join(output_dir, "albert_config.json")
    if tf.io.gfile.exists(path):
        ours = AlbertConfig.from_json_file(path)
        # What the model reads: not the keys it keeps unread (the original's vestiges).
        changed = [f"{k} (run: {getattr(ours, k)!r}, given: {getattr(config, k)!r})"
                   for k in sorted(f.name for f in dataclasses.fields(AlbertConfig))
                   if k != "extra" and getattr(ours, k) != getattr(config, k)]
        if changed:
            raise ValueError(
                f"the config differs from the one the run in --output_dir={output_dir} was "
                f"started with, in {', '.join(changed)}. Resume with {path}, or give "
                f"--output_dir a new directory to train another model")
    changed = changed_settings(output_dir, settings)
    if changed:
        logging.warning("Resuming the run in %s with settings other than it last trained with "
                        "(run.json): %s", output_dir, ", ".join(changed))


def check_run_kind(output_dir, kind):
    """A run's directory is resumed only by a run of its kind (`run.json`, written with the
    first checkpoint: "pretraining", "fine-tuning of sst-2", ...), refused before anything is
    written there."""
    theirs = recorded_kind(output_dir)
    if theirs and theirs != kind:
        raise ValueError(f"--output_dir={output_dir} holds the checkpoints of another run "
                         f"({theirs}), and this is {kind}: give --output_dir a new directory "
                         f"(to start from that run's weights, pass it as --init_checkpoint)")


# run_race's runs: their head (output_weights, output_bias, as a classifier's) scores each
# answer choice, not classes.
CHOICE_RUN_KINDS = ("fine-tuning of race", "fine-tuning of c3")


def recorded_kind(output_dir):
    """The kind of run in `output_dir` (run.json: "pretraining", "fine-tuning of race", ...),
    or None."""
    return _read_run(output_dir).get("kind") or None


def _read_run(output_dir):
    """run.json's contents; {} where there is none or it cannot be read."""
    path = os.path.join(output_dir, RUN_FILE)
    try:
        with tf.io.gfile.GFile(path) as f:
            run = json.load(f)
    except (ValueError, tf.errors.OpError):
        return {}
    return run if isinstance(run, dict) else {}


def model_class(model):
    """The name run.json keeps of a model's class: `module.QualifiedName`."""
    return f"{type(model).__module__}.{type(model).__qualname__}"


def recorded_model(output_dir):
    """The class of the model the run in `output_dir` trained (run.json's `model_class`), or
    None (a run from before it was recorded, or none)."""
    return _read_run(output_dir).get("model_class") or None


def foreign_model(output_dir):
    """The run's model class where it is one of the user's own (outside albert_tf: a head the
    tools that rebuild a task's stock model from its variables would read wrongly), else
    None."""
    name = recorded_model(output_dir) if output_dir else None
    return name if name and not name.startswith("albert_tf.") else None


def check_run_model(output_dir, model):
    """A run is continued (trained, evaluated, predicted, exported) only with the class of
    model it trained: another with the same variables would load without complaint."""
    theirs, ours = recorded_model(output_dir), model_class(model)
    if theirs and theirs != ours:
        raise ValueError(f"the run in --output_dir={output_dir} trained {theirs} (run.json), "
                         f"and this builds {ours}, which would read its checkpoints "
                         f"otherwise: give the flags it trained with, or --output_dir a new "
                         f"directory")


def record_run(output_dir, kind, settings=None, model=None):
    """run.json, with each training process's first checkpoint: the run's kind, the class of
    its `model` and the settings (its options) it last trained with, those a rerun leaves unset
    (None) kept from before; once they change, also those it started with ("started_with")."""
    path = os.path.join(output_dir, RUN_FILE)
    if not kind:
        return
    run = _read_run(output_dir)
    before, now = run.get("settings"), _as_recorded(settings)
    if not run:
        write_json(path, {"kind": kind, **({"model_class": model} if model else {}),
                          **({"settings": now} if now else {})})
    elif before and _differences(before, now):
        write_json(path, {**run, "started_with": run.get("started_with", before), "settings": {
            **before, **{k: v for k, v in now.items()
                         if v is not None and k not in START_ONLY}}})


def _as_recorded(settings):
    return json.loads(json.dumps(settings or {}))  # as JSON holds them: tuples are lists


def _differences(theirs, now):
    """The settings' names whose values differ, but for what is each rerun's own (do_train,
    do_eval, do_predict), where the run is (a copied directory is the same run) and what a rerun
    leaves unset (None: the starting checkpoint, --long_text's "as the run did")."""
    return [name for name in sorted(set(theirs) & set(now))
            if not name.startswith("do_") and name != "output_dir" and now[name] is not None
            and theirs[name] != now[name]]


def run_directory_of(checkpoint):
    """The directory whose run.json speaks for `checkpoint`: itself (a run's directory), or the
    one holding it (a checkpoint prefix); None for anything else (a model's name)."""
    path = os.fspath(checkpoint).rstrip("/")
    try:
        if tf.io.gfile.isdir(path):
            return path
        return (os.path.dirname(path) or ".") if tf.io.gfile.exists(path + ".index") else None
    except tf.errors.OpError:  # a scheme TensorFlow's file system has not: hf://, a name
        return None


def recorded_settings(output_dir, kind=""):
    """The settings the run in `output_dir` last trained with (run.json), by flag name; {} when
    it recorded none, or when its kind ("pretraining", "fine-tuning of sst-2", ...) does not
    start with `kind`."""
    run = _read_run(output_dir)
    return (run.get("settings") or {}) if (run.get("kind") or "").startswith(kind) else {}


def changed_settings(output_dir, settings):
    """`--name (run: then, now: now)` for each setting (`_differences`) that differs from those
    the run in `output_dir` last trained with (run.json; a run that recorded none: [])."""
    theirs, now = recorded_settings(output_dir), _as_recorded(settings)
    return [f"--{name} (run: {theirs[name]!r}, now: {now[name]!r}"
            + ("; not read: a resume goes on from its own checkpoints)" if name in START_ONLY
               else ")") for name in _differences(theirs, now)]


def refuse_foreign_checkpoints(output_dir):
    """An output_dir with checkpoints but none of a run (a release's model.ckpt-best, another
    tool's files) is not started over."""
    others = [n for n in listdir(output_dir) if n.endswith(".index") or n == "checkpoint"]
    if others:
        raise ValueError(
            f"--output_dir={output_dir} holds checkpoint files ({', '.join(others[:3])}) "
            f"but no checkpoint of a run to resume (model.ckpt-<step>): it is a release's or "
            f"another tool's directory. Give --output_dir a new directory")


def random_state(model):
    """A trackable of the model's dropout seed-generator states, in layer order."""
    states = [v for v in model.variables if v.name == "seed_generator_state"]
    return tf.train.Checkpoint(**{f"seed_{i}": getattr(v, "value", v)
                                  for i, v in enumerate(states)})
