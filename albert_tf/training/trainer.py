"""One custom training loop for every tf.distribute strategy (one device, mirrored, multi-worker,
TPU): distributed steps with gradient accumulation, checkpoints that resume exactly, evaluation
that keeps the best checkpoint, TensorBoard summaries and progress logs.

The model is also the task: `denominators(features)`, `loss_sums(features, outputs)`,
`replica_loss(sums, denominators)`, `metrics_from_sums(sums)`, `config` (AlbertConfig or None,
for the memory estimate). Loss terms are divided by denominators all-reduced over the global
batch, so every split of a batch (replicas, micro-batches) gives the gradient of the same
global loss. Beside the loop: checkpoint_saving (what a checkpoint holds, saving, restoring),
recovery (acting on the loss guard) and failures (the errors a run stops with).
"""

import math
import os
import shutil

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.modeling.optimizers import ReplicaLossScaleOptimizer, current_learning_rate
from albert_tf.tracing import graph_function
from albert_tf.training import results
from albert_tf.training.checkpoint_files import (
    check_run_config, refuse_foreign_checkpoints, resumable_checkpoints)
from albert_tf.training.checkpoint_saving import CheckpointSaver
from albert_tf.training.distribution import (check_batch_sizes, describe_compilation, is_chief,
                                             log_step_memory)
from albert_tf.training.excursions import LossGuard
from albert_tf.training.failures import (
    NonFiniteLossError, StopRequest, eval_failures, interrupted, out_of_memory, service_watchdog,
    training_failures)
from albert_tf.training.input_state import TrainingInput, worker_index_and_count
from albert_tf.training.progress import Progress
from albert_tf.training.recovery import NoRecovery, Recovery, learning_rate_factor

SUM = tf.distribute.ReduceOp.SUM


class Trainer:
    """Builds model and optimizer under `strategy`, then trains, checkpoints and evaluates as
    `options` (a training.trainer_options.TrainerOptions) say."""

    def __init__(self, strategy, model_fn, optimizer_fn, output_dir, options):
        self.strategy, self.output_dir, self.options = strategy, output_dir, options
        self.global_batch_size = options.global_batch_size
        self.accumulation = int(options.gradient_accumulation_steps)
        self.steps_per_execution = max(1, int(options.steps_per_execution))
        check_batch_sizes(strategy, self.global_batch_size, self.accumulation)
        self.chief = is_chief(strategy)
        # Every worker takes part in saving (it is collective), but only the chief keeps files.
        self.write_dir = output_dir if self.chief else os.path.join(
            output_dir, f".worker-{strategy.cluster_resolver.task_id}-tmp")
        tf.io.gfile.makedirs(self.write_dir)
        with strategy.scope():
            self.model = model_fn()
            self.optimizer = optimizer_fn()
            if keras.mixed_precision.global_policy().name == "mixed_float16":
                self.optimizer = ReplicaLossScaleOptimizer(self.optimizer)
            self.optimizer.build(self.model.trainable_variables)
            # Loss excursions (training.recovery): the guard's state is saved with every
            # checkpoint; a recovery lowers the learning rate through this factor.
            self.guard = LossGuard(options.excursions) if options.excursions else None
            lr_scale = learning_rate_factor(self.optimizer) if self.guard else None
        self.saver = CheckpointSaver(self.model, self.optimizer, self.guard, output_dir,
                                     self.write_dir, self.chief, options)
        self.recovery = (Recovery(self.guard, lr_scale, self.saver, self.restore, self._writer)
                         if self.guard else NoRecovery(self.saver))
        # One device: forward, backward and update as one XLA computation. Mirrored and
        # multi-worker updates all-reduce across replicas, which stays outside XLA: there the
        # forward and backward pass is compiled. A TPU compiles every step whatever the flag.
        self.whole_step_jit = bool(options.jit_compile) and isinstance(
            strategy, tf.distribute.OneDeviceStrategy)
        self.gradients_jit = bool(options.jit_compile) and not self.whole_step_jit
        self._grad_fn = graph_function(self._gradients, jit_compile=self.gradients_jit)
        self._step_fn = (graph_function(self._replica_step, jit_compile=True)
                         if self.whole_step_jit else self._replica_step)
        self._train_fn = graph_function(self._train_steps)
        # Eval batches come in a few lengths (the padding buckets): one trace for any length from
        # the second, but on a TPU, which compiles each length apart anyway.
        generic = not isinstance(strategy, tf.distribute.TPUStrategy)
        self._eval_fn = graph_function(self._eval_step, reduce_retracing=generic)
        self._predict_fn = graph_function(self._predict_step, reduce_retracing=generic)
        self._writers = {}
        self._input = None
        self._agree_fn = None
        self._logged_unreached = False
        self.num_workers = worker_index_and_count(strategy)[1]

    # ---- state ---------------------------------------------------------------------------

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def _last_checkpoint(self):
        return tf.train.latest_checkpoint(self.output_dir)

    def restore_or_initialize(self, init_checkpoint=None, init_from_group0=False,
                              allow_missing=(), allow_reshaped=()):
        """Resumes from the newest intact checkpoint in output_dir, else loads `init_checkpoint`.

        A missing, truncated or corrupt newest checkpoint (or a missing `checkpoint` index) is
        skipped, saying so, for the one before it. A run resumes only with the config it started
        with. Checkpoints none of this can resume (all unreadable, or only a release's
        model.ckpt-best) stop the run: it never starts again from step 1 over them.
        """
        candidates = resumable_checkpoints(self.output_dir)
        if candidates:
            check_run_config(self.output_dir, self.model.config, self.options.run_settings)
            resumed = self.saver.restore_newest_intact(candidates, self.restore)
            logging.info("Resumed from %s at step %d, at learning rate %.4g", resumed,
                         self.step, current_learning_rate(self.optimizer))
            return self.recovery.finish_interrupted(resumed)
        refuse_foreign_checkpoints(self.output_dir)
        if init_checkpoint:
            self.model.load_checkpoint(init_checkpoint, init_from_group0=init_from_group0,
                                       allow_missing=allow_missing,
                                       allow_reshaped=allow_reshaped)
            logging.info("Initialised weights from %s", init_checkpoint)
        return None

    def save(self):
        """Saves the input position, then the checkpoint (training.checkpoint_saving); returns
        its path on the chief, None on the other workers."""
        return self.saver.save(self._input)

    # ---- steps ---------------------------------------------------------------------------

    def _gradients(self, features, denominators):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            sums = self.model.loss_sums(features, outputs)
            loss = self.model.replica_loss(sums, denominators)
            scaled = self.optimizer.scale_loss(loss)
        variables = self.model.trainable_variables
        grads = tape.gradient(scaled, variables)
        # Known when traced: the variables no loss reaches (the pooler under a span or tagging
        # head). They get zeros to accumulate and no update (_apply).
        self._unreached = [g is None for g in grads]
        return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(grads, variables)], sums

    def _apply(self, grads):
        """The update, as the original's optimizers make it: a variable without a gradient is
        left as it is (no weight decay, no LAMB step) and keeps its (zero) slots."""
        pairs, skipped = [], []
        for g, v, unreached in zip(grads, self.model.trainable_variables, self._unreached):
            if unreached:
                skipped.append(v.path)
            else:
                pairs.append((g, v))
        if skipped and not self._logged_unreached:  # (traced again for each padded length)
            self._logged_unreached = True
            logging.info("No loss reaches %s: not updated (as in the original)",
                         ", ".join(skipped))
        self.optimizer.apply_gradients(pairs)

    def _replica_step(self, features):
        context = tf.distribute.get_replica_context()
        denominators = context.all_reduce(SUM, self.model.denominators(features))
        if self.accumulation == 1:
            grads, sums = self._grad_fn(features, denominators)
        else:
            k = self.accumulation
            micro = {name: tf.reshape(value, tf.concat([[k, -1], tf.shape(value)[1:]], 0))
                     for name, value in features.items()}

            def micro_step(i, grads, sums):
                g, s = self._grad_fn({n: v[i] for n, v in micro.items()}, denominators)
                return i + 1, [a + b for a, b in zip(grads, g)], {n: sums[n] + s[n] for n in sums}

            # One micro-batch at a time: overlapping iterations (tf.while_loop runs up to 10 at
            # once by default) would hold several micro-batches' activations, which
            # accumulation exists to avoid, and race on the dropout seed state.
            _, grads, sums = tf.while_loop(
                lambda i, *_: i < k, micro_step,
                (tf.constant(0), [tf.zeros_like(v) for v in self.model.trainable_variables],
                 self._zero_sums()), parallel_iterations=1, maximum_iterations=k)
        self._apply(grads)
        return sums

    def _zero_sums(self):
        return {name: tf.zeros([]) for name in self.model.LOSS_SUM_NAMES}

    def _train_steps(self, iterator, num_steps):
        def step(i, totals):
            per_replica = self.strategy.run(self._step_fn, args=(iterator.next(),))
            return i + 1, {n: totals[n] + self.strategy.reduce(SUM, per_replica[n], axis=None)
                           for n in totals}
        return tf.while_loop(lambda i, _: i < num_steps, step,
                             (tf.constant(0), self._zero_sums()))[1]

    def _eval_step(self, features):
        def replica(batch):
            return self.model.loss_sums(batch, self.model(batch, training=False))
        per_replica = self.strategy.run(replica, args=(features,))
        return {n: self.strategy.reduce(SUM, v, axis=None) for n, v in per_replica.items()}

    # ---- loops ---------------------------------------------------------------------------

    def _writer(self, name):
        if name not in self._writers:
            path = os.path.join(self.write_dir, name) if self.chief else os.path.join(
                self.write_dir, "unused")
            self._writers[name] = tf.summary.create_file_writer(path)
        return self._writers[name]

    def _compiled(self):
        return describe_compilation(self.strategy, self.whole_step_jit, self.gradients_jit)

    def train(self, dataset_fn, num_train_steps, *, on_checkpoint=None, on_log=None,
              evaluate_restarts=False):
        """Trains up to `num_train_steps` (global steps), saving every `save_checkpoints_steps`.

        dataset_fn(input_context) returns the per-replica batches. `on_checkpoint(path, step)`
        runs after each save (the pretraining script evaluates there), `on_log(step, metrics)`
        after each progress line. A non-finite loss stops training before anything is saved.
        With a guard, a loss excursion is reported or recovered (training.recovery);
        `evaluate_restarts`: on_checkpoint evaluates, and runs again for the checkpoint that
        training resumes or rolls back to (whose checkpoint cannot hold its own evaluation),
        so that the guard sees the held-out losses an uninterrupted run saw.
        """
        last_saved = self._last_checkpoint()
        if self.step >= num_train_steps:
            logging.info("Step %d already reaches the last step, %d", self.step, num_train_steps)
            return self.step
        iterator = self._open_input(dataset_fn)
        restarts = on_checkpoint if (evaluate_restarts and self.guard) else None
        self.memory = log_step_memory(self.model, self.optimizer, self.strategy, self.options)
        logging.info("Training steps %d to %d: %s", self.step + 1, num_train_steps,
                     self._compiled())
        progress = Progress(self._writer("train"), self.global_batch_size, num_train_steps,
                            self.optimizer)
        stop = StopRequest()
        watchdog = service_watchdog(dataset_fn, lambda: self.step, self._last_checkpoint)
        stopping, saved_at = False, None
        try:
            with training_failures(dataset_fn, self.num_workers, lambda: self.step,
                                   self._last_checkpoint):
                if restarts and last_saved and self.step > 0:
                    self.recovery.resumed(restarts, last_saved, self._boundary(
                        self.options.save_checkpoints_steps, num_train_steps))
                while self.step < num_train_steps and not stopping:
                    chunk = self._chunk(num_train_steps)
                    with watchdog, progress.timed(chunk):
                        sums = self._run_chunk(iterator, chunk, last_saved)
                    if self._recovered(sums, chunk, restarts):
                        progress.restart()
                        last_saved = self._last_checkpoint()
                    else:
                        progress.add(sums, chunk)
                        self._log(progress, num_train_steps, on_log)
                        if self._boundary(self.options.save_checkpoints_steps, num_train_steps):
                            path = self.save()
                            last_saved, saved_at = path or last_saved, self.step
                            if on_checkpoint is not None and self.recovery.evaluated(
                                    on_checkpoint, path):
                                progress.restart()
                                last_saved = self._last_checkpoint()
                    stopping = self._any_worker(stop.requested)
        finally:
            stop.restore()
            watchdog.stop()
        if self.guard:
            logging.info("Loss guard: %s", self.guard.headroom())
        if stopping and self.step < num_train_steps:
            if saved_at != self.step:
                self.save()
            raise interrupted(stop, self.step, self._last_checkpoint())
        return self.step

    def _open_input(self, dataset_fn):
        """The training input at the restored step's position (and past the batches a resumed
        recovery skips)."""
        self._input = TrainingInput(self.strategy, dataset_fn, self.output_dir,
                                    self.global_batch_size)
        self._input.restore(self.step, self.guard.state["batches_read"] if self.guard else None)
        self._input.skip(self.recovery.take_input_skip())
        return self._input

    def _chunk(self, num_train_steps):
        """The steps of the next call: up to the end, the next checkpoint or progress line."""
        step = self.step
        boundaries = [num_train_steps] + [(step // every + 1) * every for every in (
            self.options.save_checkpoints_steps, self.options.log_steps)]
        return min(self.steps_per_execution, min(boundaries) - step)

    def _boundary(self, every, num_train_steps):
        return self.step % every == 0 or self.step >= num_train_steps

    def _log(self, progress, num_train_steps, on_log):
        if self._boundary(self.options.log_steps, num_train_steps):
            metrics = progress.log(self.step, self.model.metrics_from_sums,
                                   current_learning_rate(self.optimizer))
            if on_log is not None:
                on_log(self.step, metrics)

    def observe_eval(self, step, loss):
        """A held-out loss for the guard (the pretraining script's evaluation reports it)."""
        self.recovery.observe_eval(step, loss)

    def _recovered(self, sums, chunk, restarts):
        """Whether the guard saw an excursion in these steps and training went back to an
        earlier checkpoint (training.recovery)."""
        return self.recovery.observe(self.step, self.model.metrics_from_sums(sums)["loss"],
                                     chunk, restarts)

    def _any_worker(self, requested):
        """Whether any worker was asked to stop: every worker takes the same decision at the
        same step, so that all of them stop there and save one consistent checkpoint."""
        if self.num_workers == 1:
            return bool(requested)
        if self._agree_fn is None:
            def agree(flag):
                per_replica = self.strategy.run(lambda: tf.identity(flag))
                return self.strategy.reduce(SUM, per_replica, axis=None)
            self._agree_fn = graph_function(agree)
        return float(self._agree_fn(tf.constant(1.0 if requested else 0.0))) > 0

    def _run_chunk(self, iterator, chunk, last_saved):
        """Runs `chunk` steps; returns their loss sums, or stops on a non-finite loss (which a
        recovering guard takes as an excursion instead)."""
        step = self.step
        with out_of_memory(self.memory, step, last_saved):
            sums = self._train_fn(iterator, tf.constant(chunk))
            sums = {n: float(v.numpy()) for n, v in sums.items()}
        loss = float(self.model.metrics_from_sums(sums)["loss"])
        if not math.isfinite(loss) and not self.recovery.recovers:
            raise NonFiniteLossError(
                f"loss became {loss} in the steps {step + 1}..{step + chunk}; nothing was "
                f"saved after it. Last good checkpoint: {last_saved or 'none'}. Lower "
                f"--learning_rate or check the data.")
        return sums

    def evaluate(self, dataset_fn, max_steps=None):
        """Metrics over the eval data (up to `max_steps` global batches)."""
        dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
        totals, batches = None, 0
        with eval_failures(dataset_fn, self.step):
            for features in dataset:
                if max_steps and batches >= max_steps:
                    break
                sums = {n: float(v.numpy()) for n, v in self._eval_fn(features).items()}
                totals = sums if totals is None else {n: totals[n] + sums[n] for n in sums}
                batches += 1
        if totals is None:
            raise ValueError("the eval data yielded no complete batch; lower --eval_batch_size")
        result = {n: float(v) for n, v in self.model.metrics_from_sums(totals).items()}
        result["global_step"] = self.step
        return result

    def restore(self, checkpoint_path):
        """Loads one of this trainer's checkpoints (e.g. model.ckpt-best): model, optimizer,
        dropout's random state and the loss guard's state (each kept as it is for checkpoints
        written without it)."""
        self.recovery.restored(self.saver.restore(checkpoint_path), self.step)
        logging.info("Restored %s (step %d)", checkpoint_path, self.step)

    def _predict_step(self, features):
        def replica(batch):
            return self.model.prediction_outputs(batch, self.model(batch, training=False))
        per_replica = self.strategy.run(replica, args=(features,))
        return {n: self.strategy.gather(v, axis=0) for n, v in per_replica.items()}

    def predict(self, dataset_fn):
        """The model's `prediction_outputs(features, outputs)` for every batch, as numpy arrays
        concatenated in batch order and gathered over replicas (arrays need equal trailing dims)."""
        dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
        chunks = [{n: v.numpy() for n, v in self._predict_fn(features).items()}
                  for features in dataset]
        if not chunks:
            raise ValueError("the prediction data yielded no batch")
        return {n: np.concatenate([c[n] for c in chunks]) for n in chunks[0]}

    def record_eval(self, result, checkpoint_path, best_metric, higher_is_better=True,
                    examples=None):
        """Writes eval_results.txt and summaries; copies the best checkpoint to model.ckpt-best.
        Returns True when `checkpoint_path` is the new best."""
        if not self.chief:
            return False
        if result["global_step"] == self.recovery.replayed_step:  # recorded before (resumed)
            return False
        with self._writer("eval").as_default(step=result["global_step"]):
            for name, value in result.items():
                if name != "global_step":
                    tf.summary.scalar(name, value)
        return results.record_eval(self.output_dir, result, checkpoint_path, best_metric,
                                   higher_is_better, examples)

    def close(self):
        """Closes the summary writers and lets the training input go now (the trainer itself,
        held in reference cycles by its tf.functions, lingers until Python collects it, and with
        it the input pipeline's threads and buffers)."""
        self._input = None
        for writer in self._writers.values():
            writer.close()
        if not self.chief:
            shutil.rmtree(self.write_dir, ignore_errors=True)
