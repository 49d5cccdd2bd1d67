"""Training: the one custom loop for every strategy (trainer) and its settings
(trainer_options), how a run stops other than by finishing (failures), saving and restoring its
checkpoints (checkpoint_saving) and which files in output_dir are whose (checkpoint_files), the
loss guard (excursions) and its recoveries (recovery), progress lines (progress), LAMB/AdamW and
the learning-rate schedule (optimizers), strategy + precision + XLA choice (distribution), eval
results and the best checkpoint (results), what a step needs in device memory (step_memory)."""
