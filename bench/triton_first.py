"""Imported first by the tools here that run a PyTorch peer beside TensorFlow: triton, the
kernel compiler of PyTorch's CUDA builds (the only builds the registry has for Python 3.12 and
3.13), is loaded by torch._dynamo, as transformers' models load it. It and TensorFlow each carry
LLVM, and triton's loaded after TensorFlow's kills the process: "LLVM ERROR: inconsistency in
registered CommandLine options" (exit 134) with triton 3.9 on 3.11, a segmentation fault in
triton/knobs.py on 3.12 (issue 62). Loaded first, both work. Nothing to do where triton is not
installed (PyTorch's CPU build)."""

try:
    import triton  # noqa: F401
except ModuleNotFoundError:
    pass
