"""Data: record schemas, pretraining instances and masking, input pipelines, task readers."""
