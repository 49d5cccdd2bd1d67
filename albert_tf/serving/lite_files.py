"""Which LiteRT files a fine-tuned export writes and how their weights are quantized: the names
`serving.lite` and the scripts' flags share, in a module that imports nothing (`serving.lite`
loads tensorflow-text, which only exporting runs need)."""

QUANTIZATIONS = ("none", "float16", "dynamic_int8", "int8")
LITE_FILES = ("both", "ids", "text", "none")
