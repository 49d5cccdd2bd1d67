"""Converts an ALBERT checkpoint between the original TF1 layout, Hugging Face and ours.

  python -m albert_tf.convert_checkpoint --input=albert_base --output_dir=albert_base_hf --format=hf
"""

from absl import app, flags, logging

from albert_tf import checkpoints
from albert_tf.config import AlbertConfig

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Checkpoint: a prefix, a release directory, a Hugging Face "
                    "directory or one of our checkpoint directories.")
flags.DEFINE_string("output_dir", None, "Directory to write.")
flags.DEFINE_enum("format", "albert_tf", list(checkpoints.FORMATS), "Output format.")
flags.DEFINE_string("albert_config_file", None, "Config, if none lies beside the checkpoint.")
flags.DEFINE_enum("model", "auto", ["auto", "pretrainer", "encoder"],
                  "What to convert; auto keeps the MLM/SOP heads when the input has them.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model to copy beside the output.")
flags.DEFINE_bool("init_from_group0", False, "Fill groups missing from the input from group 0.")


def convert(input_path, output_dir, fmt, config=None, model="auto", spm_model_file=None,
            init_from_group0=False):
    """Reads `input_path`, checks it against the config, writes `output_dir` in `fmt`."""
    from albert_tf import AlbertEncoder, AlbertPretrainer
    arrays, config_path, in_fmt = checkpoints.read_checkpoint(input_path)
    config = config or config_path
    if config is None:
        raise ValueError(f"no config beside {input_path}; pass --albert_config_file")
    if not isinstance(config, AlbertConfig):
        config = AlbertConfig.from_json_file(config)
    if model == "auto":
        model = "pretrainer" if any(n.startswith("cls/") for n in arrays) else "encoder"
    net = (AlbertPretrainer if model == "pretrainer" else AlbertEncoder)(config)
    checkpoints.assign_weights(net, arrays, source=f"{in_fmt} checkpoint {input_path}",
                               init_from_group0=init_from_group0)
    net.save_pretrained(output_dir, format=fmt, spm_model_file=spm_model_file)
    logging.info("Wrote %s (%s, %d tensors) from %s checkpoint %s", output_dir, fmt,
                 len(net.tf1_weights()), in_fmt, input_path)
    return net


def main(_):
    convert(FLAGS.input, FLAGS.output_dir, FLAGS.format, FLAGS.albert_config_file, FLAGS.model,
            FLAGS.spm_model_file, FLAGS.init_from_group0)


def run():
    flags.mark_flags_as_required(["input", "output_dir"])
    app.run(main)


if __name__ == "__main__":
    run()
