"""Imported by every tool here that runs a PyTorch peer, before it imports TensorFlow: PyTorch
imported after TensorFlow crashed the process (torch._dynamo, which transformers' models load,
segfaulted in triton's knobs.py on Python 3.12; issue 62). Without PyTorch (the bench extra has
it only on Python 3.11: setup.py) the PyTorch peers fail alone, when asked for."""

try:
    import torch  # noqa: F401
except ModuleNotFoundError:
    pass
