r"""The original export_to_tfhub.py command line: a TF-Hub SavedModel of the encoder with its
MLM and SOP heads from a release or training directory.

  python -m albert_tf.export_to_tfhub --albert_directory=albert_base \
      --checkpoint_name=model.ckpt-best --do_lower_case --use_einsum --export_path=hub/albert

The same as `python -m albert_tf.export_hub --export_type=pretrainer` (whose flags it takes);
the directory holds albert_config.json, the vocabulary (30k-clean.model, or the Chinese
releases' vocab_chinese.txt) and the checkpoint.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import flags

from albert_tf import cli, export_hub

FLAGS = flags.FLAGS


def define_flags():
    export_hub.define_flags()
    FLAGS.set_default("export_type", "pretrainer")
    FLAGS.set_default("checkpoint_name", "model.ckpt-best")
    flags.DEFINE_bool("use_einsum", True, "Accepted for compatibility: the export converts to "
                                          "TFLite builtin ops either way.")


def run(argv=None):
    define_flags()
    cli.run(export_hub.main, ["albert_directory", "export_path"], argv)


if __name__ == "__main__":
    run()
