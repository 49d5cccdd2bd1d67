"""Exports TF-Hub SavedModels: the encoder, the encoder with pretraining heads, the preprocessor.

  python -m albert_tf.export_hub --export_type=encoder --init_checkpoint=albert_base \
      --export_path=hub/albert_base_encoder
  python -m albert_tf.export_hub --export_type=preprocessor \
      --spm_model_file=albert_base/30k-clean.model --export_path=hub/albert_base_preprocess

--init_checkpoint takes anything `from_pretrained` reads (ours, the original TF1, Hugging Face).
"""

import os

from absl import app, flags, logging

EXPORT_TYPES = ("encoder", "pretrainer", "preprocessor")
FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_enum("export_type", "encoder", EXPORT_TYPES,
                      "encoder: the TF-Hub text encoder; pretrainer: the encoder plus .mlm/.sop "
                      "(MLM and SOP heads); preprocessor: strings → encoder inputs.")
    flags.DEFINE_string("init_checkpoint", None,
                        "Checkpoint prefix or directory in any format from_pretrained reads.")
    flags.DEFINE_string("albert_directory", None,
                        "The original exporter's flag: a directory with albert_config.json, the "
                        "SentencePiece model and --checkpoint_name (alias of --init_checkpoint).")
    flags.DEFINE_string("checkpoint_name", None,
                        "With --albert_directory: the checkpoint inside it (e.g. model.ckpt-best)."
                        " Default: the directory's latest checkpoint.")
    flags.DEFINE_string("albert_config_file", None,
                        "albert_config.json; default: the config beside the checkpoint.")
    flags.DEFINE_string("spm_model_file", None,
                        "SentencePiece model; default: the one *.model beside the checkpoint.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase text before SentencePiece.")
    flags.DEFINE_string("export_path", None, "Directory to write the SavedModel to.")
    flags.DEFINE_integer("default_seq_length", 128,
                         "Preprocessor: the sequence length when none is passed.")


def _checkpoint_path(init_checkpoint, albert_directory, checkpoint_name):
    if init_checkpoint:
        return init_checkpoint
    if albert_directory:
        if checkpoint_name:
            return os.path.join(albert_directory, checkpoint_name)
        return albert_directory
    return None


def find_spm_model(checkpoint):
    """The single *.model file beside (or inside) a checkpoint; a clear error otherwise."""
    import tensorflow as tf

    from albert_tf.checkpoints import resolve_checkpoint

    _, location, _ = resolve_checkpoint(checkpoint)
    directory = location if tf.io.gfile.isdir(location) else os.path.dirname(location)
    models = sorted(tf.io.gfile.glob(os.path.join(directory, "*.model")))
    if len(models) != 1:
        found = ", ".join(models) if models else "none"
        raise ValueError(f"--spm_model_file is required: expected exactly one *.model beside "
                         f"checkpoint {checkpoint} in {directory}, found {found}")
    return models[0]


def export(export_type, export_path, init_checkpoint=None, albert_config_file=None,
           spm_model_file=None, do_lower_case=True, default_seq_length=128):
    """Builds the model from the checkpoint and writes the SavedModel; returns `export_path`."""
    from albert_tf import export as export_lib

    if export_type not in EXPORT_TYPES:
        raise ValueError(f"--export_type={export_type!r}; use one of {', '.join(EXPORT_TYPES)}")
    if not export_path:
        raise ValueError("--export_path is required")
    if export_type != "preprocessor" and not init_checkpoint:
        raise ValueError(f"--export_type={export_type} needs --init_checkpoint (or "
                         f"--albert_directory)")
    if spm_model_file is None:
        if not init_checkpoint:
            raise ValueError("--spm_model_file is required")
        spm_model_file = find_spm_model(init_checkpoint)
    if not os.path.exists(spm_model_file) and "://" not in spm_model_file:
        raise FileNotFoundError(f"--spm_model_file={spm_model_file} does not exist")

    if export_type == "preprocessor":
        return export_lib.export_preprocessor(export_path, spm_model_file, do_lower_case,
                                              default_seq_length)
    if export_type == "pretrainer":
        from albert_tf.modeling.pretrainer import AlbertPretrainer as cls
    else:
        from albert_tf.modeling.encoder import AlbertEncoder as cls
    model = cls.from_pretrained(init_checkpoint, config=albert_config_file)
    logging.info("Loaded %s from %s", cls.__name__, init_checkpoint)
    return export_lib.export_encoder(model, export_path, spm_model_file, do_lower_case,
                                     with_pretrainer_heads=export_type == "pretrainer")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        path = export(FLAGS.export_type, FLAGS.export_path,
                      _checkpoint_path(FLAGS.init_checkpoint, FLAGS.albert_directory,
                                       FLAGS.checkpoint_name),
                      FLAGS.albert_config_file, FLAGS.spm_model_file, FLAGS.do_lower_case,
                      FLAGS.default_seq_length)
    except (ValueError, FileNotFoundError) as e:  # the user's mistake: the message, no trace
        raise app.UsageError(str(e)) from None
    logging.info("Wrote the %s SavedModel to %s", FLAGS.export_type, path)


if __name__ == "__main__":
    define_flags()
    app.run(main)
