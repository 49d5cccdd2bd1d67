"""The ALBERT model: layers, encoder, heads, pretrainer."""
