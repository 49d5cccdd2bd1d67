"""albert_tf: ALBERT pretraining, fine-tuning and export on TensorFlow 2 / Keras 3."""

from setuptools import find_packages, setup

# create_pretraining_data --runner=... (the shards are framed by our own writer, so Beam's
# WriteToTFRecord and the CRC package it needs are not used). Beam pins protobuf<7, and
# sentencepiece 0.2.3's model protobuf needs protobuf 7 (without it transformers' AutoTokenizer
# cannot read a spiece.model): sentencepiece 0.2.2 serves both.
SENTENCEPIECE_0_2_2 = "sentencepiece>=0.2,<0.2.3"
BEAM = ["apache-beam>=2.77,<3", SENTENCEPIECE_0_2_2]
# LiteRT, the runtime TFLite became (TensorFlow 2.21 deprecates tf.lite.Interpreter): runs the
# exported .tflite files as phones and small CPUs do.
LITERT = ["ai-edge-litert>=2.3,<3"]
# Models by name (albert_tf/formats/names.py): hf://… names and KerasHub presets / kaggle://…
# handles. TF-Hub handles and the original's releases need nothing more.
HUB = ["huggingface_hub>=0.24", "kagglehub>=0.3,!=1.0.1"]
# PyTorch for the peers' parity (transformers' AlbertForPreTraining): only on Python 3.11, whose
# CPU build lies on local disk; for other Pythons the registry has only the multi-GB CUDA build,
# and there the parity tests say they were skipped (peers() in tests/conftest.py).
TORCH = 'torch==2.13.0; python_version == "3.11"'

setup(
    name="albert_tf",
    version="0.1.0",
    description="ALBERT (A Lite BERT) for TensorFlow 2 / Keras 3: pretrain, fine-tune, export.",
    packages=find_packages(include=["albert_tf", "albert_tf.*"]),
    package_data={"albert_tf": ["resources/*"]},
    # CI runs the whole suite on 3.11 and the fast tier on 3.12 and 3.13 (.ci/run); 3.10 is out:
    # the test extra's keras-hub 0.32 has no build for it.
    python_requires=">=3.11",
    classifiers=[
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
    ],
    install_requires=[
        "tensorflow==2.21.*",
        "tensorflow-text==2.21.*",
        "keras>=3.10,<4",
        "sentencepiece>=0.2",
        "tensorflow-hub==0.16.*",
        # tensorflow-hub 0.16 imports pkg_resources, which setuptools 81 removed.
        "setuptools<81",
        "absl-py>=2.0",
        "tensorboard>=2.20",
        "numpy>=1.26",
        "safetensors>=0.4",
    ],
    extras_require={
        "beam": BEAM,
        "litert": LITERT,
        "hub": HUB,
        "test": [
            *BEAM,
            *LITERT,
            *HUB,
            "pytest>=8",
            # The suite runs its test files on every core (scripts/test.sh).
            "pytest-xdist>=3.5",
            "tf-keras==2.21.*",
            "transformers>=4.45",
            # The original tokenization.py (2019), for the tokenizer parity test.
            "albert-tensorflow==1.1",
            TORCH,
            # KerasHub presets both ways (tests/test_keras_hub.py).
            "keras-hub==0.32.*",
            # scripts/demo_report.py draws the demo's curves (tests/test_demo.py).
            "matplotlib>=3.8",
            # notebooks/ run headless (tests/test_notebook.py).
            "nbclient>=0.10",
            "nbformat>=5.10",
            "ipykernel>=6.29",
        ],
        # scripts/demo.sh: the PNG of the training curves; LiteRT scores the exported .tflite.
        # The test extra's SentencePiece: 0.2.2 and 0.2.3 train different vocabularies from the
        # same text, and the demo's must not depend on which README command ran first.
        "demo": ["matplotlib>=3.8", *LITERT, SENTENCEPIECE_0_2_2],
        # notebooks/: Jupyter and the inline plots.
        "notebook": ["jupyterlab>=4", "matplotlib>=3.8"],
        "keras_hub": ["keras-hub==0.32.*"],
        # The peers that bench/ compares against.
        "bench": ["keras-hub==0.32.*", "transformers>=4.45", TORCH, "onnx>=1.17",
                  "onnxruntime>=1.20"],
    },
)
