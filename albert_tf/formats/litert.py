"""LiteRT (.tflite) files: whether LiteRT is installed, and its interpreter with
tensorflow-text's TFLite kernels registered (the text-in models' tokenizer ops)."""

import importlib.util

from tensorflow_text import tflite_registrar

LITERT_MISSING = ("running .tflite files needs LiteRT, which is not installed: "
                  "pip install 'albert_tf[litert]' (ai-edge-litert)")


def litert_installed():
    return importlib.util.find_spec("ai_edge_litert") is not None


def interpreter(model_path=None, model_content=None, num_threads=None):
    """LiteRT's interpreter with tensorflow-text's TFLite kernels registered."""
    if not litert_installed():
        raise ImportError(LITERT_MISSING)
    from ai_edge_litert.interpreter import InterpreterWithCustomOps  # the `litert` extra
    return InterpreterWithCustomOps(custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
                                    model_path=model_path, model_content=model_content,
                                    num_threads=num_threads)
