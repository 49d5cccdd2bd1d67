"""Model formats: what a path holds (resolve), reading and writing each checkpoint format
(original TF1, Hugging Face, ours), TF-Hub encoders, and the tokenizer that goes with a model."""
