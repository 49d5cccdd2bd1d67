"""Training: the one custom loop for every strategy (trainer), how a run stops other than by
finishing (failures), its checkpoint files (checkpoint_files), progress lines (progress),
LAMB/AdamW and the learning-rate schedule (optimizers), strategy + precision + XLA choice
(distribution), eval results and the best checkpoint (results)."""
