r"""Builds ALBERT pretraining TFRecords (MLM + SOP) from text: the original flags, faster.

    python -m albert_tf.create_pretraining_data --input_file=corpus/*.txt \
        --output_file=out/train.tfrecord --spm_model_file=30k-clean.model \
        --max_seq_length=512 --dupe_factor=40 --num_workers=4

On Apache Beam (`pip install albert_tf[beam]`), with Beam's own pipeline options passed through:

    python -m albert_tf.create_pretraining_data ... --runner=DirectRunner \
        --direct_running_mode=multi_processing --direct_num_workers=2

The library behind it: `albert_tf.data.build_records` (`albert_tf.data.beam_builder`).
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

import sys

from absl import flags

from albert_tf import cli
from albert_tf.data.build_records import BuildOptions, build

FLAGS = flags.FLAGS
_PIPELINE_ARGS = []  # the command line's Beam pipeline options, with --runner


def define_flags():
    """The original builder's flags and defaults, plus sop_random_negatives and num_workers."""
    flags.DEFINE_string("input_file", None, "Input raw text file(s), comma-separated globs.")
    flags.DEFINE_string("output_file", None,
                        "Output TFRecord file, or comma-separated files (see docs/data.md).")
    flags.DEFINE_string("vocab_file", None,
                        "WordPiece vocabulary (the Chinese releases' vocab_chinese.txt), with "
                        "--spm_model_file absent or empty.")
    flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (30k-clean.model).")
    flags.DEFINE_string("input_file_mode", "r", "Accepted for compatibility; files are read as "
                        "UTF-8 text.")
    flags.DEFINE_bool("do_lower_case", True, "Lowercase the input text.")
    flags.DEFINE_bool("do_whole_word_mask", True, "Mask whole words rather than single pieces.")
    flags.DEFINE_bool("do_permutation", False, "Add permutation targets (doubles the targets).")
    flags.DEFINE_bool("favor_shorter_ngram", True, "p(n) ∝ 1/n; False reverses it.")
    flags.DEFINE_bool("random_next_sentence", False,
                      "True: BERT NSP negatives from random documents; False: SOP (swapped order).")
    flags.DEFINE_bool("sop_random_negatives", True,
                      "True (original): a one-sentence chunk takes B from a random document "
                      "(label 1). False: it is split at a random token and swapped 50%, so "
                      "every label-1 pair is a true swap.")
    flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
    flags.DEFINE_integer("ngram", 3, "Maximum n-gram length, in words, to mask.")
    flags.DEFINE_integer("max_predictions_per_seq", 20, "Cap on masked positions per sequence.")
    flags.DEFINE_integer("random_seed", 12345, "Seed of every random choice.")
    flags.DEFINE_integer("dupe_factor", 40, "Passes over the data, each with different masks.")
    flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
    flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
    flags.DEFINE_integer("num_workers", 1, "Processes building input shards in parallel; with "
                         "--runner, Beam's --num_workers (Dataflow's initial workers).")
    flags.DEFINE_string("runner", None,
                        "Build on Apache Beam with this runner (DirectRunner, DataflowRunner, "
                        "FlinkRunner, SparkRunner, ...); Beam's pipeline options (--key=value) "
                        "are passed through. Unset: the local builder.")
    flags.DEFINE_bool("overwrite", False,
                      "Replace existing TFRecord files at --output_file (nothing else is ever "
                      "replaced).")


def main(_):
    options = BuildOptions(
        spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
        do_lower_case=FLAGS.do_lower_case,
        do_whole_word_mask=FLAGS.do_whole_word_mask, do_permutation=FLAGS.do_permutation,
        favor_shorter_ngram=FLAGS.favor_shorter_ngram,
        random_next_sentence=FLAGS.random_next_sentence,
        sop_random_negatives=FLAGS.sop_random_negatives, max_seq_length=FLAGS.max_seq_length,
        ngram=FLAGS.ngram, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        random_seed=FLAGS.random_seed, dupe_factor=FLAGS.dupe_factor,
        masked_lm_prob=FLAGS.masked_lm_prob, short_seq_prob=FLAGS.short_seq_prob)
    if FLAGS.runner is None:
        build(FLAGS.input_file, FLAGS.output_file, options, FLAGS.num_workers, FLAGS.overwrite)
        return
    try:
        from albert_tf.data import beam_builder  # optional: the [beam] extra
    except ImportError as e:
        raise ValueError(f"--runner={FLAGS.runner} needs Apache Beam: pip install "
                         f"'albert_tf[beam]' ({e})") from None
    pipeline_args = [f"--runner={FLAGS.runner}", *_PIPELINE_ARGS]
    if FLAGS["num_workers"].present:
        pipeline_args.append(f"--num_workers={FLAGS.num_workers}")
    beam_builder.build(FLAGS.input_file, FLAGS.output_file, options, pipeline_args,
                       FLAGS.overwrite)


def split_pipeline_args(argv):
    """(our arguments, Beam's): with --runner, the --options no flag of ours names (a value
    given as the next argument travels with its option) go to Beam."""
    if not any(a == "--runner" or a.startswith("--runner=") for a in argv[1:]):
        return argv, []
    ours, theirs = argv[:1], []
    target = ours
    for arg in argv[1:]:
        if arg.startswith("-"):
            name = arg.lstrip("-").split("=", 1)[0]
            known = name in FLAGS or (name.startswith("no") and name[2:] in FLAGS)
            target = ours if known else theirs
        target.append(arg)
    return ours, theirs


def run(argv=None):
    define_flags()
    argv, pipeline_args = split_pipeline_args(sys.argv if argv is None else argv)
    _PIPELINE_ARGS[:] = pipeline_args
    cli.run(main, ["input_file", "output_file"], argv)


if __name__ == "__main__":
    run()
