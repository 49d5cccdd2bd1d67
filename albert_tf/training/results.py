"""Evaluation results in the original eval_results.txt format, and the best checkpoint kept
apart as model.ckpt-best (best_checkpoint.txt says which step and value it holds)."""

import collections
import glob
import os

import tensorflow as tf
from absl import logging

from albert_tf.files import atomic_write_text
from albert_tf.formats.checkpoints import publish_checkpoint
from albert_tf.formats.resolve import BEST_NAME, BEST_RECORD, read_best_record

RESULT = "result."  # best_checkpoint.txt's lines of the best evaluation's results


def write_eval_results(path, result):
    """The original eval_results.txt format: `key = value` lines, sorted."""
    atomic_write_text(path, "".join(f"{key} = {result[key]}\n" for key in sorted(result)))


def format_results(result):
    """`result`'s metrics (not its global_step) for a log line."""
    return "  ".join(f"{k} {v:.4g}" for k, v in sorted(result.items()) if k != "global_step")


def remove_stale_results(path, why):
    """Removes `path`, an earlier command's results (`key = number` lines, as
    write_eval_results writes them) that would read as this one's; a file in another form is
    not ours, and is left."""
    if not tf.io.gfile.exists(path):
        return
    with tf.io.gfile.GFile(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines or not all(_is_result_line(line) for line in lines):
        logging.warning("%s is not a results file this tool wrote: left as it is", path)
        return
    tf.io.gfile.remove(path)
    logging.info("Removed %s, an earlier prediction's scores: %s", path, why)


def _is_result_line(line):
    key, equals, value = line.partition(" = ")
    try:
        float(value)
    except ValueError:
        return False
    return bool(key and equals)


def recorded_step(output_dir):
    """The step of the evaluation eval_results.txt holds, or None."""
    path = os.path.join(output_dir, "eval_results.txt")
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        for line in f:
            key, _, value = line.partition(" = ")
            if key == "global_step" and value.strip().isdigit():
                return int(value)
    return None


def forget_best(output_dir):
    """Removes the record of the best evaluation (best_checkpoint.txt), so that the next
    evaluations pick the best anew; model.ckpt-best stays until one replaces it."""
    path = os.path.join(output_dir, BEST_RECORD)
    if tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def copy_checkpoint(prefix, target_prefix):
    """Copies a checkpoint's files to a new prefix, through temporary names."""
    tmp = f"{target_prefix}.tmp-{os.getpid()}"
    for path in sorted(tf.io.gfile.glob(prefix + ".data-*")):
        tf.io.gfile.copy(path, tmp + path[len(prefix):], overwrite=True)
    tf.io.gfile.copy(prefix + ".index", tmp + ".index", overwrite=True)
    publish_checkpoint(tmp, target_prefix)


def record_eval(output_dir, result, checkpoint_path, best_metric, higher_is_better=True,
                examples=None):
    """Writes output_dir/eval_results.txt; when `result[best_metric]` beats the best so far
    (or ties it with a lower loss), copies the checkpoint to model.ckpt-best and returns
    True. `examples`, the number evaluated, goes into the log line."""
    step = result["global_step"]
    write_eval_results(os.path.join(output_dir, "eval_results.txt"), result)
    logging.info("Eval at step %d%s: %s", step, f" on {examples} examples" if examples else "",
                 format_results(result))
    best_file = os.path.join(output_dir, BEST_RECORD)
    value = result[best_metric]
    previous = read_best_record(output_dir)
    if previous is not None and not (_beats(value, previous["value"], higher_is_better) or
                                     value == previous["value"] and _lower_loss(result, previous)):
        return False
    # Until the new best_checkpoint.txt is written, none: a kill in between leaves the best
    # checkpoint without a record of its value rather than with the value of another.
    forget_best(output_dir)
    if os.path.basename(checkpoint_path) != BEST_NAME:  # (else: measured again, already there)
        copy_checkpoint(checkpoint_path, os.path.join(output_dir, BEST_NAME))
    atomic_write_text(best_file, f"global_step = {step}\nmetric = {best_metric}\n"
                                 f"value = {value}\ncheckpoint = {checkpoint_path}\n" + "".join(
                                     f"{RESULT}{k} = {v}\n" for k, v in sorted(result.items())
                                     if k != "global_step"))
    tie = previous is not None and value == previous["value"]
    logging.info("New best %s %.4g at step %d%s: %s", best_metric, value, step,
                 f" (a tie with step {previous['global_step']}, at a lower {_loss_key(result)} "
                 f"{result[_loss_key(result)]:.4g})" if tie else "", BEST_NAME)
    return True


def _beats(value, best, higher_is_better):
    return value > best if higher_is_better else value < best


def _loss_key(result):
    """Fine-tuning's results name their loss eval_loss; pretraining's (the original's) loss."""
    return "eval_loss" if "eval_loss" in result else "loss"


def _lower_loss(result, record):
    """Whether `result` has a lower loss than the best `record` kept (a tie on the metric,
    common on a small dev set, goes to the better fit)."""
    key = _loss_key(result)
    kept = record.get(RESULT + key)
    return key in result and kept is not None and result[key] < float(kept)


def best_results(output_dir):
    """The evaluation results of the run's best checkpoint (best_checkpoint.txt; a record
    written before it kept them all: its metric alone), or None without one."""
    record = read_best_record(output_dir)
    if record is None:
        return None
    results = {k[len(RESULT):]: float(v) for k, v in record.items() if k.startswith(RESULT)}
    return {record["metric"]: record["value"], **results, "global_step": record["global_step"]}


def read_scalars(run_dir):
    """{tag: [(step, value), ...]} from the TensorBoard event files in `run_dir` (a run's
    output_dir/train or /eval)."""
    values = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for v in event.summary.value:
                value = (float(tf.make_ndarray(v.tensor)) if v.HasField("tensor")
                         else float(v.simple_value))
                values[v.tag][int(event.step)] = value
    return {tag: sorted(points.items()) for tag, points in values.items()}
