r"""Exports TF-Hub SavedModels: the encoder, the encoder with pretraining heads, the preprocessor.

  python -m albert_tf.export_hub --export_type=encoder --init_checkpoint=albert_base \
      --export_path=hub/albert_base_encoder
  python -m albert_tf.export_hub --export_type=preprocessor \
      --spm_model_file=albert_base/30k-clean.model --export_path=hub/albert_base_preprocess

--init_checkpoint takes anything `from_pretrained` reads (ours, the original TF1, Hugging Face).
The library behind it: `albert_tf.serving.export`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import os

from absl import flags, logging

from albert_tf import cli
from albert_tf.serving.export import EXPORT_TYPES, export_from_checkpoint

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_enum("export_type", "encoder", EXPORT_TYPES,
                      "encoder: the TF-Hub text encoder; pretrainer: the encoder plus .mlm/.sop "
                      "(MLM and SOP heads); preprocessor: strings → encoder inputs.")
    flags.DEFINE_string("init_checkpoint", None,
                        "Checkpoint prefix or directory in any format from_pretrained reads, "
                        "or a model's name (docs/models.md).")
    flags.DEFINE_string("albert_directory", None,
                        "The original exporter's flag: a directory with albert_config.json, the "
                        "SentencePiece model and --checkpoint_name (alias of --init_checkpoint).")
    flags.DEFINE_string("checkpoint_name", None,
                        "With --albert_directory: the checkpoint inside it (e.g. model.ckpt-best)."
                        " Default: the directory's latest checkpoint.")
    flags.DEFINE_string("albert_config_file", None,
                        "albert_config.json; default: the config beside the checkpoint.")
    flags.DEFINE_string("spm_model_file", None,
                        "SentencePiece model; default: the one *.model (or WordPiece "
                        "vocab*.txt) beside the checkpoint.")
    flags.DEFINE_string("vocab_file", None,
                        "WordPiece vocabulary (the Chinese releases' vocab_chinese.txt), instead "
                        "of --spm_model_file.")
    flags.DEFINE_bool("do_lower_case", None, "Lowercase the text before tokenizing; default: "
                      "the checkpoint's tokenizer setting (a Hugging Face tokenizer_config.json), "
                      "else true.")
    flags.DEFINE_string("export_path", None, "Directory to write the SavedModel to.")
    flags.DEFINE_integer("default_seq_length", 128,
                         "Preprocessor: the sequence length when none is passed.")
    flags.DEFINE_bool("overwrite", False,
                      "Replace an earlier SavedModel export at --export_path (nothing else is "
                      "ever replaced).")


def _checkpoint_path(init_checkpoint, albert_directory, checkpoint_name):
    if init_checkpoint:
        return init_checkpoint
    if albert_directory:
        if checkpoint_name:
            return os.path.join(albert_directory, checkpoint_name)
        return albert_directory
    return None


def main(_):
    checkpoint = _checkpoint_path(FLAGS.init_checkpoint, FLAGS.albert_directory,
                                  FLAGS.checkpoint_name)
    inputs = {"init_checkpoint": FLAGS.init_checkpoint, "albert_directory": FLAGS.albert_directory,
              "spm_model_file": FLAGS.spm_model_file, "vocab_file": FLAGS.vocab_file,
              "albert_config_file": FLAGS.albert_config_file}
    path = export_from_checkpoint(
        FLAGS.export_type, FLAGS.export_path, checkpoint, FLAGS.albert_config_file,
        FLAGS.spm_model_file, FLAGS.do_lower_case, FLAGS.default_seq_length, FLAGS.overwrite,
        inputs, FLAGS.vocab_file)
    logging.info("Wrote the %s SavedModel to %s", FLAGS.export_type, path)


def run(argv=None):
    define_flags()
    cli.run(main, ["export_path"], argv)


if __name__ == "__main__":
    run()
