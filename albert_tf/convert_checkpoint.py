"""Converts an ALBERT checkpoint between the original TF1 layout, Hugging Face, KerasHub
presets and ours.

  python -m albert_tf.convert_checkpoint --input=albert_base --output_dir=albert_base_hf --format=hf
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import flags

from albert_tf import cli
from albert_tf.conversion import MODELS, convert
from albert_tf.formats.checkpoints import FORMATS

FLAGS = flags.FLAGS


def define_flags():
    """Defined when run as a program, not on import (other scripts share some names)."""
    flags.DEFINE_string("input", None, "Checkpoint: a prefix, a release directory, a Hugging "
                        "Face directory, one of our checkpoint directories or a model's name "
                        "(docs/models.md).")
    flags.DEFINE_string("output_dir", None, "Directory to write.")
    flags.DEFINE_enum("format", "albert_tf", list(FORMATS), "Output format.")
    flags.DEFINE_string("albert_config_file", None,
                        "Config, if none lies beside the checkpoint.")
    flags.DEFINE_enum("model", "auto", list(MODELS),
                      "What to convert; auto: the model the input holds, with its heads (MLM "
                      "and SOP; a fine-tuned classifier's, with its labels: hf "
                      "AlbertForSequenceClassification with id2label; RACE's: "
                      "AlbertForMultipleChoice; SQuAD's: AlbertForQuestionAnswering (v1.1); a "
                      "token classifier's), encoder: the encoder alone.")
    flags.DEFINE_string("spm_model_file", None,
                        "SentencePiece model to write with the output (hf: spiece.model and "
                        "tokenizer_config.json; keras_hub: the preset's tokenizer). Default: "
                        "the vocabulary --input carries (beside it, or its own tokenizer files).")
    flags.DEFINE_string("vocab_file", None,
                        "WordPiece vocabulary (vocab_chinese.txt) to write with the output "
                        "(hf: vocab.txt and tokenizer_config.json for BertTokenizer). Default: "
                        "as for --spm_model_file.")
    flags.DEFINE_bool("do_lower_case", None,
                      "The vocabulary's casing, written into the hf/keras_hub tokenizer files. "
                      "Default: the input's tokenizer_config.json, else true.")
    flags.DEFINE_bool("init_from_group0", False,
                      "Fill groups missing from the input from group 0.")
    flags.DEFINE_bool("overwrite", False,
                      "Replace an earlier conversion in --output_dir (nothing else is ever "
                      "replaced).")


def main(_):
    convert(FLAGS.input, FLAGS.output_dir, FLAGS.format, FLAGS.albert_config_file, FLAGS.model,
            FLAGS.spm_model_file, FLAGS.init_from_group0, FLAGS.overwrite, FLAGS.vocab_file,
            FLAGS.do_lower_case)


def run(argv=None):
    define_flags()
    cli.run(main, ["input", "output_dir"], argv)


if __name__ == "__main__":
    run()
