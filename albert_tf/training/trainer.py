"""One custom training loop for every tf.distribute strategy (one device, mirrored, multi-worker,
TPU): distributed steps with gradient accumulation, checkpoints that resume exactly, evaluation
that keeps the best checkpoint, TensorBoard summaries and progress logs.

The model is also the task: it provides `denominators(features)`, `loss_sums(features,
outputs)`, `replica_loss(sums, denominators)` and `metrics_from_sums(sums)`. Loss terms are
divided by denominators all-reduced over the whole global batch, so every split of a batch
(replicas, micro-batches) gives the gradient of the same global loss.
"""

import math
import os
import shutil
import signal

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.files import writing
from albert_tf.formats.checkpoints import named_weights_checkpoint, write_checkpoint_index
from albert_tf.formats.tokenizers import keep_vocabulary
from albert_tf.modeling.optimizers import (
    ReplicaLossScaleOptimizer, current_learning_rate, scale_learning_rate)
from albert_tf.tracing import graph_function
from albert_tf.training import results
from albert_tf.training.checkpoint_files import (
    CHECKPOINT_NAME, UNREADABLE, check_run_config, checkpoints_on_disk, drop_checkpoints,
    prune_checkpoints, random_state, record_run_kind, refuse_foreign_checkpoints,
    resumable_checkpoints, unreadable_reason)
from albert_tf.training.distribution import check_batch_sizes, is_chief
from albert_tf.training.excursions import (
    LossExcursionError, LossGuard, plan_recovery, read_log, write_log)
from albert_tf.training.failures import (
    COLLECTIVE_FAILURES, CorruptInputError, InputServiceError, Interrupted, NonFiniteLossError,
    StopRequest, Watchdog, WorkerLostError, bad_record, corrupt_input_message, corrupt_where,
    failure_detail, rerun_to, service_gap_message)
from albert_tf.training.input_state import TrainingInput, worker_index_and_count
from albert_tf.training.progress import Progress

SUM = tf.distribute.ReduceOp.SUM


class Trainer:
    """Builds model and optimizer under `strategy`, then trains, checkpoints and evaluates."""

    def __init__(self, strategy, model_fn, optimizer_fn, output_dir, *, global_batch_size,
                 gradient_accumulation_steps=1, steps_per_execution=1, jit_compile=False,
                 keep_checkpoint_max=5, run_lock=None, run_kind=None, tokenizer=None,
                 excursions=None):
        self.strategy = strategy
        self.run_lock = run_lock  # checked before each save (see training.run_lock)
        self.run_kind = run_kind  # recorded with the first checkpoint (checkpoint_files)
        self.tokenizer = tokenizer  # its vocabulary is kept with the first checkpoint
        self.output_dir = output_dir
        self.global_batch_size = global_batch_size
        self.accumulation = int(gradient_accumulation_steps)
        self.steps_per_execution = max(1, int(steps_per_execution))
        check_batch_sizes(strategy, global_batch_size, self.accumulation)
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
            # Loss excursions (training.excursions): the guard's state is saved with every
            # checkpoint; a recovery lowers the learning rate through this factor.
            self.excursions = excursions
            self.guard = LossGuard(excursions) if excursions else None
            if self.guard:
                self.lr_scale = tf.Variable(
                    1.0, trainable=False, name="lr_scale",
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
                scale_learning_rate(self.optimizer, self.lr_scale)
        self._config_written = False
        # Dropout's random state is saved too: a resumed run draws the masks the killed one
        # would have drawn.
        self.checkpoint = tf.train.Checkpoint(model=named_weights_checkpoint(self.model),
                                              optimizer=self.optimizer,
                                              rng=random_state(self.model),
                                              **({"guard": self.guard} if self.guard else {}))
        self.keep_checkpoint_max = keep_checkpoint_max
        self._input_skip = 0  # batches a resumed recovery still has to skip (train)
        self._eval_excursion = None
        self.manager = self._checkpoint_manager()
        # One device: forward, backward and update as one XLA computation. Mirrored and
        # multi-worker updates all-reduce across replicas, which stays outside XLA: there the
        # forward and backward pass is compiled. A TPU compiles every step whatever the flag.
        self.whole_step_jit = bool(jit_compile) and isinstance(
            strategy, tf.distribute.OneDeviceStrategy)
        self.gradients_jit = bool(jit_compile) and not self.whole_step_jit
        self._grad_fn = graph_function(self._gradients, jit_compile=self.gradients_jit)
        self._step_fn = (graph_function(self._replica_step, jit_compile=True)
                         if self.whole_step_jit else self._replica_step)
        self._train_fn = graph_function(self._train_steps)
        self._eval_fn = graph_function(self._eval_step)
        self._writers = {}
        self._input = None
        self._agree_fn = None
        self._logged_unreached = False
        self.num_workers = worker_index_and_count(strategy)[1]

    # ---- state ---------------------------------------------------------------------------

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    def _checkpoint_manager(self):
        # With a guard, prune_checkpoints keeps them (a recovery's may be older than the newest).
        return tf.train.CheckpointManager(
            self.checkpoint, self.write_dir,
            max_to_keep=None if self.guard else self.keep_checkpoint_max,
            checkpoint_name=CHECKPOINT_NAME, step_counter=self.optimizer.iterations)

    def _checkpoint_steps(self):
        return checkpoints_on_disk(self.write_dir)

    def _drop_checkpoints(self, steps):
        drop_checkpoints(self.write_dir, steps)
        # The manager lists what it saved itself; the index lists every kept one.
        self.manager = self._checkpoint_manager()

    def restore_or_initialize(self, init_checkpoint=None, init_from_group0=False,
                              allow_missing=(), allow_reshaped=()):
        """Resumes from the newest intact checkpoint in output_dir, else loads `init_checkpoint`.

        A missing, truncated or corrupt newest checkpoint (or a missing `checkpoint` index) is
        skipped, saying so, for the one before it. A run's checkpoints are only resumed with the
        config the run was started with. Checkpoints that none of this can resume (all
        unreadable, or only a release's model.ckpt-best) stop the run: it never starts again
        from step 1 over them.
        """
        candidates = resumable_checkpoints(self.output_dir)
        if candidates:
            check_run_config(self.output_dir, self.model.config)
            resumed = self._restore_newest_intact(candidates)
            logging.info("Resumed from %s at step %d", resumed, self.step)
            return self._finish_recovery(resumed)
        refuse_foreign_checkpoints(self.output_dir)
        if init_checkpoint:
            self.model.load_checkpoint(init_checkpoint, init_from_group0=init_from_group0,
                                       allow_missing=allow_missing,
                                       allow_reshaped=allow_reshaped)
            logging.info("Initialised weights from %s", init_checkpoint)
        return None

    def _restore_newest_intact(self, candidates):
        """Restores the newest candidate that reads whole; if it is not the newest listed, the
        `checkpoint` index is rewritten to list the intact ones up to it."""
        failures = []
        for step, prefix in candidates:
            try:
                self.restore(prefix)
            except UNREADABLE as e:
                failures.append(f"{os.path.basename(prefix)} ({unreadable_reason(e)})")
                logging.warning("Checkpoint %s cannot be read (%s)%s", prefix,
                                unreadable_reason(e), "; trying the one before it"
                                if (step, prefix) != candidates[-1] else "")
                continue
            if failures or tf.train.latest_checkpoint(self.output_dir) != prefix:
                kept = [p for s, p in reversed(candidates)
                        if s <= step and tf.io.gfile.exists(p + ".index")]
                if self.chief:
                    write_checkpoint_index(self.output_dir, kept)
                self.manager = self._checkpoint_manager()
                logging.warning("Resuming from %s, the newest intact checkpoint (%s)", prefix,
                                f"skipped {', '.join(failures)}" if failures else
                                "the `checkpoint` index was missing or did not list it")
            return prefix
        raise ValueError(
            f"no checkpoint in --output_dir={self.output_dir} can be read: "
            f"{'; '.join(failures)}. Move them away to start from step 1, or restore them")

    def _finish_recovery(self, resumed):
        """A run killed after a recovery was decided and before its next checkpoint: the
        recovery is made again from excursions.json (the same checkpoint, learning rate and
        input position as the killed run's), so the rerun ends as an uninterrupted run."""
        if not self.guard:
            return resumed
        log = read_log(self.output_dir)
        done = self.guard.state["recoveries"]
        if done > len(log):
            logging.warning("The checkpoint counts %d recoveries and %s lists %d: the file was "
                            "changed or removed", done,
                            os.path.join(self.output_dir, "excursions.json"), len(log))
        if done >= len(log):
            return resumed
        entry = log[-1]
        logging.warning("Recovery %d was not finished before the run stopped: going back to "
                        "step %d as it did", entry["number"], entry["rolled_back_to_step"])
        prefix = self._roll_back(entry)
        self._input_skip = entry["skipped_batches"]
        return prefix

    def _roll_back(self, entry):
        """Restores the recovery's checkpoint (dropping every later one) and applies it: the
        recovery count, the input offset and the learning-rate factor. Returns the prefix."""
        anchor = entry["rolled_back_to_step"]
        prefix = self._checkpoint_steps().get(anchor)
        if prefix is None:
            raise LossExcursionError(
                f"the checkpoint of step {anchor} that recovery {entry['number']} goes back to "
                f"is not in {self.output_dir}")
        self._drop_checkpoints([s for s in self._checkpoint_steps() if s > anchor])
        self.restore(prefix)
        self.guard.apply(entry)
        self.lr_scale.assign(entry["lr_scale"])
        return prefix

    def _write_config(self):
        """albert_config.json and the vocabulary beside the checkpoints (written with the first
        one), so that output_dir is itself a from_pretrained and load_tokenizer source."""
        if self.chief and not self._config_written:
            self.model.config.to_json_file(os.path.join(self.output_dir, "albert_config.json"))
            if self.tokenizer is not None:
                keep_vocabulary(self.output_dir, self.tokenizer)
            record_run_kind(self.output_dir, self.run_kind)
            self._config_written = True

    def save(self):
        """Saves the input position, then the checkpoint (whose index makes both trusted)."""
        if self.run_lock is not None:
            self.run_lock.verify()
        prefix = os.path.join(self.write_dir, f"{CHECKPOINT_NAME}-{self.step}")
        last = tf.train.latest_checkpoint(self.output_dir)
        temporary = [prefix + "_temp*", prefix + ".tmp*"]
        if not tf.io.gfile.exists(prefix + ".index"):  # no data file without its index
            temporary.append(prefix + ".data-*")
        if self._input is not None:
            temporary.append(os.path.join(self._input.directory, f"step-{self.step}*"))
        with writing("checkpoint", prefix, temporary, intact=(
                f"the last good checkpoint {last} is intact and the rerun resumes from it"
                if last else "no checkpoint was saved before it, so the rerun starts at step 1")):
            path = self._save_files()
        if not self.chief:
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def _save_files(self):
        self._write_config()
        if self._input is not None:
            self._input.save(self.step)
        path = self.manager.save(checkpoint_number=self.step)
        if self.guard:
            prune_checkpoints(self.write_dir, self.keep_checkpoint_max, self.guard.anchor_steps())
            self.manager = self._checkpoint_manager()
        if self._input is not None:
            self._input.prune(self._checkpoint_steps())
        return path

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
        """What of the training step XLA compiles, for the log."""
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            return "the TPU compiles the whole step with XLA"
        if self.whole_step_jit:
            return "forward, backward and update compiled as one XLA computation"
        if self.gradients_jit:
            return "forward and backward compiled with XLA, the update outside it"
        return "TensorFlow ops, no XLA"

    def train(self, dataset_fn, num_train_steps, *, save_checkpoints_steps, log_steps=100,
              on_checkpoint=None, on_log=None, evaluate_restarts=False):
        """Trains up to `num_train_steps` (global steps), saving every `save_checkpoints_steps`.

        dataset_fn(input_context) returns the per-replica batches. `on_checkpoint(path, step)`
        runs after each save (the pretraining script evaluates there), `on_log(step, metrics)`
        after each progress line. A non-finite loss stops training before anything is saved.
        With a guard, a loss excursion is reported or recovered (training.excursions);
        `evaluate_restarts`: on_checkpoint evaluates, and runs again for the checkpoint that
        training resumes or rolls back to (whose checkpoint cannot hold its own evaluation),
        so that the guard sees the held-out losses an uninterrupted run saw.
        """
        last_saved = tf.train.latest_checkpoint(self.output_dir)
        if self.step >= num_train_steps:
            logging.info("Step %d already reaches num_train_steps=%d", self.step, num_train_steps)
            return self.step
        iterator = self._input = TrainingInput(self.strategy, dataset_fn, self.output_dir)
        iterator.restore(self.step, self.guard.state["batches_read"] if self.guard else None)
        iterator.skip(self._input_skip)
        self._input_skip = 0
        restarts = on_checkpoint if (evaluate_restarts and self.guard) else None
        logging.info("Training steps %d to %d: %s", self.step + 1, num_train_steps,
                     self._compiled())
        progress = Progress(self._writer("train"), self.global_batch_size, num_train_steps)
        stop = StopRequest()
        watchdog = self._service_watchdog(dataset_fn)
        stopping, saved_at = False, None
        try:
            if restarts and last_saved and self.step > 0:
                self._evaluated(restarts, last_saved)
            while self.step < num_train_steps and not stopping:
                step = self.step
                boundaries = [num_train_steps, (step // save_checkpoints_steps + 1)
                              * save_checkpoints_steps, (step // log_steps + 1) * log_steps]
                chunk = min(self.steps_per_execution, min(boundaries) - step)
                with watchdog:
                    sums = self._run_chunk(iterator, chunk, last_saved)
                if self.guard and self._recovered(self.guard.observe(
                        self.step, self.model.metrics_from_sums(sums)["loss"], chunk), restarts):
                    progress.restart()
                    last_saved = tf.train.latest_checkpoint(self.output_dir)
                    stopping = self._any_worker(stop.requested)
                    continue
                progress.add(sums, chunk)
                step = self.step
                if step % log_steps == 0 or step >= num_train_steps:
                    metrics = progress.log(step, self.model.metrics_from_sums,
                                           current_learning_rate(self.optimizer))
                    if on_log is not None:
                        on_log(step, metrics)
                if step % save_checkpoints_steps == 0 or step >= num_train_steps:
                    path = self.save()
                    last_saved, saved_at = path or last_saved, step
                    if on_checkpoint is not None and self._evaluated(on_checkpoint, path):
                        progress.restart()
                        last_saved = tf.train.latest_checkpoint(self.output_dir)
                stopping = self._any_worker(stop.requested)
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            last = tf.train.latest_checkpoint(self.output_dir)
            gap = service_gap_message(e, getattr(dataset_fn, "data_service", None), self.step,
                                      last)
            if gap:
                raise InputServiceError(gap) from e
            if not bad_record(e):
                raise
            raise CorruptInputError(corrupt_input_message(e, dataset_fn, self.step, last)) from e
        except COLLECTIVE_FAILURES as e:
            if self.num_workers == 1:
                raise
            raise WorkerLostError(
                f"a worker of the job stopped or became unreachable after step {self.step} "
                f"({failure_detail(e)}). Last checkpoint: "
                f"{tf.train.latest_checkpoint(self.output_dir) or 'none'}. Restart every "
                f"worker with the same command to resume from it.") from e
        finally:
            stop.restore()
            watchdog.stop()
        if self.guard:
            logging.info("Loss guard: %s", self.guard.headroom())
        if stopping and self.step < num_train_steps:
            if saved_at != self.step:
                self.save()
            why = stop.requested or "a stop request of another worker"
            saved = tf.train.latest_checkpoint(self.output_dir)
            logging.warning("Stopping at step %d on %s; rerun the same command to resume from "
                            "%s", self.step, why, saved)
            raise Interrupted(f"stopped at step {self.step} on {why}; nothing after training "
                              f"ran. Rerun the same command to resume from {saved}",
                              stop.signum or signal.SIGTERM)
        return self.step

    # ---- loss excursions ---------------------------------------------------------------------

    def observe_eval(self, step, loss):
        """A held-out loss for the guard (the pretraining script's evaluation reports it)."""
        if self.guard:
            self._eval_excursion = self.guard.observe_eval(step, loss)

    def _evaluated(self, on_checkpoint, path):
        """Runs on_checkpoint for `path`; a held-out excursion it reports is acted on. Returns
        whether training went back to an earlier checkpoint."""
        on_checkpoint(path, self.step)
        excursion, self._eval_excursion = self._eval_excursion, None
        return self._recovered(excursion, on_checkpoint)

    def _recovered(self, excursion, restarts=None):
        """Reports an excursion and acts as the settings say; True when training went back to
        an earlier checkpoint (then `restarts`, given, evaluates it)."""
        if excursion is None:
            return False
        settings, guard = self.excursions, self.guard
        with self._writer("train").as_default(step=excursion.step):
            tf.summary.scalar("excursions/" + excursion.kind.replace(" ", "_"), excursion.loss)
        last = tf.train.latest_checkpoint(self.output_dir)
        if settings.action == "stop" or (settings.action == "recover" and
                                         guard.state["recoveries"] >= settings.max_recoveries):
            why = ("--on_loss_spike=stop" if settings.action == "stop" else
                   f"{guard.state['recoveries']} recoveries already (--max_loss_recoveries)")
            raise LossExcursionError(
                f"{excursion.describe()}; stopped ({why}). Last checkpoint: {last or 'none'}; "
                f"excursions.json lists the recoveries. Lower --learning_rate and rerun in a "
                f"new --output_dir, or resume with --on_loss_spike=warn")
        entry = (plan_recovery(guard, excursion, self._checkpoint_steps())
                 if settings.action == "recover" else None)
        if entry is None and excursion.kind == "non-finite loss":
            raise NonFiniteLossError(
                f"{excursion.describe()}, and no checkpoint from before it is left to go back "
                f"to; nothing was saved after it. Last checkpoint: {last or 'none'}. Lower "
                f"--learning_rate or check the data.")
        if entry is None:
            logging.warning("Loss excursion: %s. %s", excursion.describe(),
                            "Going on (--on_loss_spike=warn)" if settings.action == "warn" else
                            f"No checkpoint from before it (step <= "
                            f"{guard.anchor_for(excursion)}) to go back to: going on")
            return False
        logging.warning(
            "Loss excursion: %s. Recovery %d: back to step %d (%s), past the %d batches that led "
            "into it, learning rate x%g", excursion.describe(), entry["number"],
            entry["rolled_back_to_step"], f"{CHECKPOINT_NAME}-{entry['rolled_back_to_step']}",
            entry["skipped_batches"], entry["lr_scale"])
        # Written first: a run killed from here on makes the same recovery when rerun.
        if self.chief:
            write_log(self.output_dir, read_log(self.output_dir) + [entry])
        prefix = self._roll_back(entry)
        with self._writer("train").as_default(step=excursion.step):
            tf.summary.scalar("excursions/recoveries", entry["number"])
            tf.summary.scalar("excursions/learning_rate_factor", entry["lr_scale"])
        if restarts is not None:
            self._evaluated(restarts, prefix)
        return True

    def _service_watchdog(self, dataset_fn):
        """Stops a run fed by tf.data service whose steps stop coming (its workers gone)."""
        address = getattr(dataset_fn, "data_service", None)
        timeout = getattr(dataset_fn, "data_service_timeout", None)

        def message():
            last = tf.train.latest_checkpoint(self.output_dir)
            return (f"no training step finished in {timeout:.0f} s (after step {self.step}) "
                    f"while the batches come from the tf.data service at {address}: its workers "
                    f"are gone or stalled (or a step compiles for longer: raise "
                    f"--data_service_timeout). Last checkpoint: {last or 'none'}. Start the "
                    f"workers, then rerun the same command to {rerun_to(last)}.")
        return Watchdog(timeout if address else None, message)

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
        sums = self._train_fn(iterator, tf.constant(chunk))
        sums = {n: float(v.numpy()) for n, v in sums.items()}
        loss = float(self.model.metrics_from_sums(sums)["loss"])
        if not math.isfinite(loss) and not (self.guard and self.excursions.action == "recover"):
            raise NonFiniteLossError(
                f"loss became {loss} in the steps {step + 1}..{step + chunk}; nothing was "
                f"saved after it. Last good checkpoint: {last_saved or 'none'}. Lower "
                f"--learning_rate or check the data.")
        return sums

    def evaluate(self, dataset_fn, max_steps=None):
        """Metrics over the eval data (up to `max_steps` global batches)."""
        dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
        totals, batches = None, 0
        try:
            for features in dataset:
                if max_steps and batches >= max_steps:
                    break
                sums = {n: float(v.numpy()) for n, v in self._eval_fn(features).items()}
                totals = sums if totals is None else {n: totals[n] + sums[n] for n in sums}
                batches += 1
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            if not bad_record(e):
                raise
            raise CorruptInputError(
                f"{corrupt_where(e, dataset_fn, 'an eval')}. Evaluation at step {self.step} "
                f"stopped; replace or remove the file, then rerun the same command.") from e
        if totals is None:
            raise ValueError("the eval data yielded no complete batch; lower --eval_batch_size")
        result = {n: float(v) for n, v in self.model.metrics_from_sums(totals).items()}
        result["global_step"] = self.step
        return result

    def restore(self, checkpoint_path):
        """Loads one of this trainer's checkpoints (e.g. model.ckpt-best): model, optimizer,
        dropout's random state and the loss guard's state (each kept as it is for checkpoints
        written without it)."""
        names = tf.train.load_checkpoint(checkpoint_path).get_variable_to_shape_map()
        parts = {"model": self.checkpoint.model, "optimizer": self.optimizer}
        for name in ("rng", "guard"):  # kept as they are where a checkpoint has none
            if hasattr(self.checkpoint, name) and any(n.startswith(name + "/") for n in names):
                parts[name] = getattr(self.checkpoint, name)
        tf.train.Checkpoint(**parts).restore(checkpoint_path).assert_existing_objects_matched()
        if self.guard:
            if "guard" not in parts:  # an older run's checkpoint: its input read one per step
                self.guard.state["batches_read"] = self.step
            self.lr_scale.assign(self.guard.state["lr_scale"])
        logging.info("Restored %s (step %d)", checkpoint_path, self.step)

    def _predict_step(self, features):
        def replica(batch):
            return self.model.prediction_outputs(batch, self.model(batch, training=False))
        per_replica = self.strategy.run(replica, args=(features,))
        return {n: self.strategy.gather(v, axis=0) for n, v in per_replica.items()}

    def predict(self, dataset_fn):
        """The model's `prediction_outputs(features, outputs)` for every batch, as numpy arrays
        concatenated in batch order and gathered over replicas (arrays need equal trailing dims)."""
        if getattr(self, "_predict_fn", None) is None:
            self._predict_fn = graph_function(self._predict_step)
        dataset = self.strategy.distribute_datasets_from_function(dataset_fn)
        chunks = [{n: v.numpy() for n, v in self._predict_fn(features).items()}
                  for features in dataset]
        if not chunks:
            raise ValueError("the prediction data yielded no batch")
        return {n: np.concatenate([c[n] for c in chunks]) for n in chunks[0]}

    def record_eval(self, result, checkpoint_path, best_metric, higher_is_better=True):
        """Writes eval_results.txt and summaries; copies the best checkpoint to model.ckpt-best.

        Returns True when `checkpoint_path` is the new best.
        """
        if not self.chief:
            return False
        with self._writer("eval").as_default(step=result["global_step"]):
            for name, value in result.items():
                if name != "global_step":
                    tf.summary.scalar(name, value)
        return results.record_eval(self.output_dir, result, checkpoint_path, best_metric,
                                   higher_is_better)

    def close(self):
        """Closes the summary writers and lets the training input go now (the trainer itself,
        held in reference cycles by its tf.functions, lingers until Python collects it, and with
        it the input pipeline's threads and buffers)."""
        self._input = None
        for writer in self._writers.values():
            writer.close()
        if not self.chief:
            shutil.rmtree(self.write_dir, ignore_errors=True)
