r"""The original export_checkpoints.py command line: the checkpoint's model weights without the
optimizer's slots, as a TF1 checkpoint at --export_path.

  python -m albert_tf.export_checkpoints --albert_directory=out/pretrain \
      --checkpoint_name=model.ckpt-best --do_lower_case --export_path=slim/model.ckpt

Reads any checkpoint `from_pretrained` reads (ours, the original TF1, Hugging Face); the
written one loads in the original code, in `from_pretrained` and in `--init_checkpoint`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import os

from absl import flags

from albert_tf import cli
from albert_tf.conversion import write_slim_tf1

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("albert_directory", None,
                        "Directory with albert_config.json and the checkpoint.")
    flags.DEFINE_string("checkpoint_name", "model.ckpt-best",
                        "The checkpoint inside --albert_directory.")
    flags.DEFINE_bool("do_lower_case", True, "Accepted for compatibility (weights only).")
    flags.DEFINE_string("albert_config_file", None,
                        "albert_config.json; default: the one in --albert_directory.")
    flags.DEFINE_string("export_path", None, "Prefix of the checkpoint to write.")
    flags.DEFINE_bool("overwrite", False,
                      "Replace an earlier TF1 checkpoint at --export_path (nothing else is ever "
                      "replaced).")


def main(_):
    source = os.path.join(FLAGS.albert_directory, FLAGS.checkpoint_name)
    write_slim_tf1(source, FLAGS.export_path, FLAGS.albert_config_file, FLAGS.overwrite)


def run(argv=None):
    define_flags()
    cli.run(main, ["albert_directory", "export_path"], argv)


if __name__ == "__main__":
    run()
