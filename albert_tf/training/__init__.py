"""Training: the one custom loop for every strategy (trainer), LAMB/AdamW and the learning-rate
schedule (optimizers), strategy + precision + XLA choice (distribution), eval results and the
best checkpoint (results)."""
