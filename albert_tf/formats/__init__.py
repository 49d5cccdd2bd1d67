"""Model formats: what a path holds (resolve), models by name (names), reading and writing each
checkpoint format (original TF1, Hugging Face, KerasHub, ours) and their name maps, TF-Hub
encoders, LiteRT files, and the tokenizer that goes with a model."""
