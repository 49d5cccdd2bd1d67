"""A Trainer's checkpoints as it writes and reads them: what one holds (the model's weights by
their original names, the optimizer, dropout's random state, the loss guard's state), saving it
with the input position and the files that make output_dir a model directory, and restoring
it, past a damaged newest one. (checkpoint_files says which files in output_dir are whose.)"""

import os

import tensorflow as tf
from absl import logging

from albert_tf.files import writing
from albert_tf.formats.checkpoints import named_weights_checkpoint, write_checkpoint_index
from albert_tf.formats.tokenizers import check_run_vocabulary, keep_vocabulary
from albert_tf.training.checkpoint_files import (
    CHECKPOINT_NAME, UNREADABLE, checkpoints_on_disk, drop_checkpoints, model_class,
    prune_checkpoints, random_state, record_run, unreadable_reason)


class CheckpointSaver:
    """Saves and restores the checkpoints of one run. Every worker takes part in saving (it is
    collective) into its `write_dir`; only the chief's, in output_dir, are kept."""

    def __init__(self, model, optimizer, guard, output_dir, write_dir, chief, options):
        # Dropout's random state is saved too: a resumed run draws the masks the killed one
        # would have drawn.
        self.checkpoint = tf.train.Checkpoint(model=named_weights_checkpoint(model),
                                              optimizer=optimizer, rng=random_state(model),
                                              **({"guard": guard} if guard else {}))
        self.config, self.optimizer, self.guard = model.config, optimizer, guard
        self.model_class = model_class(model)
        self.step_counter = optimizer.iterations
        self.output_dir, self.write_dir, self.chief = output_dir, write_dir, chief
        self.options = options
        if chief:
            check_run_vocabulary(output_dir, options.tokenizer)
        self._config_written = False
        self.manager = self._checkpoint_manager()

    @property
    def step(self):
        return int(self.step_counter.numpy())

    def _checkpoint_manager(self):
        # With a guard, prune_checkpoints keeps them (a recovery's may be older than the newest).
        return tf.train.CheckpointManager(
            self.checkpoint, self.write_dir,
            max_to_keep=None if self.guard else self.options.keep_checkpoint_max or None,
            checkpoint_name=CHECKPOINT_NAME, step_counter=self.step_counter)

    def on_disk(self):
        """{step: prefix} of the checkpoints whose files are there."""
        return checkpoints_on_disk(self.write_dir)

    def drop(self, steps):
        drop_checkpoints(self.write_dir, steps)
        # The manager lists what it saved itself; the index lists every kept one.
        self.manager = self._checkpoint_manager()

    def save(self, training_input=None):
        """Saves the input position, then the checkpoint (whose index makes both trusted)."""
        if self.options.run_lock is not None:
            self.options.run_lock.verify()
        prefix = os.path.join(self.write_dir, f"{CHECKPOINT_NAME}-{self.step}")
        last = tf.train.latest_checkpoint(self.output_dir)
        temporary = [prefix + "_temp*", prefix + ".tmp*"]
        if not tf.io.gfile.exists(prefix + ".index"):  # no data file without its index
            temporary.append(prefix + ".data-*")
        if training_input is not None:
            temporary.append(os.path.join(training_input.directory, f"step-{self.step}*"))
        with writing("checkpoint", prefix, temporary, intact=(
                f"the last good checkpoint {last} is intact and the rerun resumes from it"
                if last else "no checkpoint was saved before it, so the rerun starts at step 1")):
            path = self._save_files(training_input)
        if not self.chief:
            return None
        logging.info("Saved checkpoint %s", path)
        return path

    def _save_files(self, training_input):
        self._write_config()
        if training_input is not None:
            training_input.save(self.step)
        path = self.manager.save(checkpoint_number=self.step)
        if self.guard:
            prune_checkpoints(self.write_dir, self.options.keep_checkpoint_max,
                              self.guard.anchor_steps())
            self.manager = self._checkpoint_manager()
        if training_input is not None:
            training_input.prune(self.on_disk())
        return path

    def _write_config(self):
        """albert_config.json and the vocabulary beside the checkpoints (written with the first
        one), so that output_dir is itself a from_pretrained and load_tokenizer source."""
        if self.chief and not self._config_written:
            self.config.to_json_file(os.path.join(self.output_dir, "albert_config.json"))
            if self.options.tokenizer is not None:
                keep_vocabulary(self.output_dir, self.options.tokenizer)
            record_run(self.output_dir, self.options.run_kind, self.options.run_settings,
                       self.model_class)
            self._config_written = True

    def restore(self, prefix):
        """Loads the model and optimizer, and dropout's random state and the loss guard's state
        where the checkpoint has them (else they are kept as they are). Returns whether it had
        the guard's."""
        names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
        parts = {"model": self.checkpoint.model, "optimizer": self.optimizer}
        for name in ("rng", "guard"):
            if hasattr(self.checkpoint, name) and any(n.startswith(name + "/") for n in names):
                parts[name] = getattr(self.checkpoint, name)
        tf.train.Checkpoint(**parts).restore(prefix).assert_existing_objects_matched()
        return "guard" in parts

    def restore_newest_intact(self, candidates, restore):
        """Restores (through `restore`) the newest candidate that reads whole; if it is not the
        newest listed, the `checkpoint` index is rewritten to list the intact ones up to it."""
        failures = []
        for step, prefix in candidates:
            try:
                restore(prefix)
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
