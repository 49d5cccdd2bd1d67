r"""Inference from any checkpoint or export: fill-mask, classification, embeddings, tags and
answers.

  python -m albert_tf.predict --task=fill_mask --model=albert_base \
      --text="The capital of France is [MASK]." --top_k=5
  python -m albert_tf.predict --task=classify --model=out/mrpc --task_name=mrpc \
      --spm_model_file=albert_base/30k-clean.model --text="..." --text_b="..."
  python -m albert_tf.predict --task=classify --model=serving/mrpc --text="..." --text_b="..."
  python -m albert_tf.predict --task=embed --model=hub/albert_base --input_file=lines.txt \
      --output_file=vectors.jsonl --pooling=mean
  python -m albert_tf.predict --task=ner --model=out/conll --text="John lives in Berlin ."
  python -m albert_tf.predict --task=qa --model=out/squad --text="Where does John live?" \
      --text_b="John lives in Berlin, near the river."
  python -m albert_tf.predict --task=choose --model=out/race --input_file=questions.jsonl

--model is a SavedModel directory (saved_model.pb: an encoder or pretrainer export of
`albert_tf.serving.export`, or a raw-string classifier serving export), or anything
`AlbertPretrainer.from_pretrained` reads (the original TF1 release directory or checkpoint
prefix, a Hugging Face directory, a run_pretraining or run_classifier output_dir; a directory
with model.ckpt-best uses that one). One JSON object per input is printed, or written to
--output_file (JSON lines; for embeddings a `.npy` path gets a [texts, hidden] float32 array).
An --input_file named .csv, .tsv or .jsonl is read by column as run_classifier reads it (the
text columns the model's run read, or --text_column_names), each row's other columns carried
into its output (qa: the question and context columns; a SQuAD .json file is read as
run_squad reads it, each answer with its question's id); for --task=choose, RACE article
files (answers optional) or JSON lines of questions (article, question, options); any other
file holds one text per line (or two tab-separated texts for pairs).

The library behind it, importable: `albert_tf.serving.FillMask`, `Classifier`, `Embedder`,
`Tagger`, `Answerer`, `Chooser`
(load once, call on lists of texts) and `albert_tf.serving.predict(task, model, texts, ...)`.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from absl import app, flags, logging

from albert_tf import cli
from albert_tf.data import c3, conll, glue, labeled_text, race, squad
from albert_tf.outputs import check_output_files
from albert_tf.serving import TASKS, Answerer, Chooser, Classifier, Embedder, FillMask, Tagger
from albert_tf.serving.embed import POOLINGS
from albert_tf.serving.predictor import DEFAULT_MAX_SEQ_LENGTH
from albert_tf.serving.text_io import read_input_file, write_results

FLAGS = flags.FLAGS


def define_flags():
    """The entry point's flags, defined on demand (names other scripts define are shared)."""
    def define(fn, name, *args, **kwargs):
        if name not in FLAGS:
            fn(name, *args, **kwargs)

    define(flags.DEFINE_enum, "task", None, list(TASKS), "What to predict.")
    define(flags.DEFINE_string, "model", None,
           "A checkpoint (original TF1 directory/prefix, Hugging Face directory, run_pretraining "
           "or run_classifier output_dir), a SavedModel export directory, or a model's name "
           "(docs/models.md).")
    define(flags.DEFINE_string, "spm_model_file", None,
           "SentencePiece model; default: the vocabulary beside the checkpoint, or the "
           "export's asset.")
    define(flags.DEFINE_string, "vocab_file", None,
           "WordPiece vocabulary (the Chinese releases' vocab_chinese.txt), instead of "
           "--spm_model_file.")
    define(flags.DEFINE_bool, "do_lower_case", None,
           "Lowercase the text; default: the export's setting, else true.")
    define(flags.DEFINE_string, "albert_config_file", None,
           "albert_config.json, when none is beside the checkpoint.")
    define(flags.DEFINE_string, "text", None,
           "One text (fill_mask: with [MASK] tokens; qa: the question).")
    define(flags.DEFINE_string, "text_b", None,
           "The second segment of a pair (qa: the context; choose: the question).")
    define(flags.DEFINE_multi_string, "choice", None,
           "choose: an option of the question in --text_b about the article in --text (give "
           "the flag once for each option).")
    define(flags.DEFINE_string, "input_file", None,
           "A .csv, .tsv or .jsonl file with a header, read by column as run_classifier reads "
           "it (--text_column_names; its other columns are carried into the output); any other "
           "file: one text per line, or two tab-separated columns for pairs.")
    labeled_text.define_column_flags(define)
    define(flags.DEFINE_string, "output_file", None,
           "Write JSON lines here instead of printing them (embed: *.npy writes an array).")
    define(flags.DEFINE_integer, "max_seq_length", DEFAULT_MAX_SEQ_LENGTH,
           "Tokens per sequence, special included (default: a fine-tuning run's (run.json), "
           "else 128, or the model's max_position_embeddings when smaller).")
    define(flags.DEFINE_integer, "window_stride", None,
           "ner and qa, from a checkpoint: tokens between the starts of a long sentence's "
           "(context's) windows; default: the run's (run.json), else half a window (qa: 128, "
           "or half the room a 64-piece question leaves when less).",
           lower_bound=1)
    define(flags.DEFINE_integer, "batch_size", 32, "Texts per model call.", lower_bound=1)
    define(flags.DEFINE_integer, "top_k", 5, "fill_mask: candidates per [MASK].")
    define(flags.DEFINE_string, "task_name", None,
           "classify: the GLUE task whose label strings the checkpoint's outputs are.")
    define(flags.DEFINE_list, "labels", None,
           "classify: label strings, comma-separated; ner: the tags of a checkpoint without "
           "labels.txt beside it.")
    define(flags.DEFINE_enum, "format", "json", ["json", "text"],
           "json: one JSON object per input; text: a short readable line per input.")
    define(flags.DEFINE_enum, "pooling", "cls", list(POOLINGS),
           "embed: cls (pooled_output), first ([CLS] of sequence_output) or mean.")
    define(flags.DEFINE_bool, "overwrite", False, "Replace --output_file if it exists.")


def main(_):
    for name in ("text", "text_b"):
        if FLAGS[name].present > 1:  # absl keeps the last: the others would go unanswered
            raise app.UsageError(f"--{name} given {FLAGS[name].present} times: it takes one "
                                 f"text; give several in --input_file, one per line")
    if (FLAGS.text is None) == (FLAGS.input_file is None):
        raise app.UsageError("give --text (and --text_b) or --input_file")
    if FLAGS.input_file and FLAGS.text_b is not None:
        raise app.UsageError("--text_b goes with --text; pairs in --input_file are two "
                             "tab-separated columns (.csv, .tsv, .jsonl: two "
                             "--text_column_names)")
    if FLAGS.window_stride is not None and FLAGS.task not in ("ner", "qa"):
        raise app.UsageError("--window_stride goes with --task=ner or --task=qa")
    if FLAGS.choice and (FLAGS.task != "choose" or FLAGS.input_file):
        raise app.UsageError("--choice goes with --task=choose and --text (the article), "
                             "--text_b (the question)")
    table = FLAGS.input_file and labeled_text.is_table(FLAGS.input_file)
    for name in ("text_column_names", "delimiter"):
        if FLAGS[name].value and not table:
            raise app.UsageError(f"--{name} goes with a .csv, .tsv or .jsonl --input_file")
    if FLAGS.output_file:
        check_output_files([FLAGS.output_file], "output_file", what="predictions",
                           overwrite=FLAGS.overwrite,
                           inputs={"input_file": FLAGS.input_file, "model": FLAGS.model,
                                   "spm_model_file": FLAGS.spm_model_file,
                                   "vocab_file": FLAGS.vocab_file})
    common = dict(spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file,
                  do_lower_case=FLAGS.do_lower_case,
                  max_seq_length=FLAGS.max_seq_length if FLAGS["max_seq_length"].present
                  else None, batch_size=FLAGS.batch_size,
                  albert_config_file=FLAGS.albert_config_file)
    if FLAGS.task == "fill_mask":
        predictor = FillMask(FLAGS.model, top_k=FLAGS.top_k, **common)
    elif FLAGS.task == "classify":
        predictor = Classifier(FLAGS.model, labels=FLAGS.labels, task_name=FLAGS.task_name,
                               **common)
    elif FLAGS.task == "ner":
        predictor = Tagger(FLAGS.model, labels=FLAGS.labels, window_stride=FLAGS.window_stride,
                           **common)
    elif FLAGS.task == "qa":
        predictor = Answerer(FLAGS.model, window_stride=FLAGS.window_stride, **common)
    elif FLAGS.task == "choose":
        questions, columns = _questions()
        write_results(Chooser(FLAGS.model, **common)(questions), FLAGS.output_file,
                      output_format=FLAGS.format, columns=columns)
        if FLAGS.output_file:
            logging.info("Wrote %d predictions to %s", len(questions), FLAGS.output_file)
        return
    else:
        predictor = Embedder(FLAGS.model, pooling=FLAGS.pooling, **common)
    texts, texts_b, columns = _inputs(predictor.text_columns, predictor.run_settings.get(
        "task_name") if FLAGS.task == "classify" else None, pairs=FLAGS.task != "ner")
    if FLAGS.task == "ner" and FLAGS.input_file and not table:
        _refuse_a_conll_file(texts)
    vectors = None
    if FLAGS.task == "embed" and FLAGS.output_file and FLAGS.output_file.endswith(".npy"):
        vectors, results = predictor.vectors(texts, texts_b), []
    else:
        results = predictor(texts, texts_b)
    write_results(results, FLAGS.output_file, vectors, output_format=FLAGS.format,
                  columns=columns)
    if FLAGS.task == "classify" and predictor.windows_read:
        logging.info("Read the %d texts in %d windows of %d tokens, stride %d, as the model's "
                     "run did (--long_text=windows): each text's logits averaged", len(texts),
                     predictor.windows_read, predictor.max_seq_length,
                     predictor.label_set.window_stride)
    if FLAGS.output_file:
        logging.info("Wrote %d predictions to %s", len(texts), FLAGS.output_file)


def _questions():
    """(race.Examples, each one's carried fields or None) of --input_file, or of --text (the
    article), --text_b (the question) and --choice (its options)."""
    if FLAGS.input_file:
        try:
            return c3.read_questions(FLAGS.input_file)  # (RACE's layouts too)
        except ValueError as e:
            raise app.UsageError(str(e)) from None
    if FLAGS.text_b is None or len(FLAGS.choice or ()) < 2:
        raise app.UsageError("--task=choose takes the article as --text, the question as "
                             "--text_b and each option as --choice (two or more), or "
                             "--input_file")
    return [race.Example("0", "", FLAGS.text, FLAGS.text_b, list(FLAGS.choice), -1)], None


def _refuse_a_conll_file(texts):
    """A CoNLL file (a token and its tag on each line) would be tagged a line a sentence."""
    fields = [text.split() for text in texts]
    if all(len(f) >= 2 for f in fields) and conll.looks_like_tags(f[-1] for f in fields):
        raise app.UsageError(f"--input_file={FLAGS.input_file} looks like a CoNLL file (a token "
                             f"and its tag on each line): --task=ner takes one sentence a line; "
                             f"run_ner --do_predict reads CoNLL files (its test.txt)")


def _inputs(remembered, task_name=None, pairs=True):
    """(texts, texts_b or None, each row's other columns or None) of --text or --input_file,
    whose text columns default to those the model's run read (`remembered`); a file of the
    run's GLUE task (`task_name`: its train/dev/test file by name) read as that task's split;
    for --task=qa, a SQuAD file's questions and contexts, with their ids. Without `pairs`
    (single sentences), a plain text file's tabs are part of its lines."""
    if not FLAGS.input_file:
        return [FLAGS.text], None if FLAGS.text_b is None else [FLAGS.text_b], None
    if FLAGS.task == "qa" and not FLAGS.text_column_names and squad.is_squad_file(
            FLAGS.input_file):
        questions, _ = squad.read_squad(FLAGS.input_file, is_training=False,
                                        version_2_with_negative=True)
        logging.info("--input_file=%s read as a SQuAD file: %d questions", FLAGS.input_file,
                     len(questions))
        return ([q.question for q in questions], [q.context for q in questions],
                [{"id": q.qas_id} for q in questions])
    task = glue.find_task(task_name)
    spec = task and not FLAGS.text_column_names and glue.split_of_file(task, FLAGS.input_file)
    if spec:
        logging.info("--input_file=%s read as %s's %s (the run's --task_name)", FLAGS.input_file,
                     task.directory, spec.filename)
        examples = glue.read_split_file(FLAGS.input_file, task, spec)
        return ([e.text_a for e in examples],
                None if spec.text_b is None else [e.text_b for e in examples],
                [{"id": e.guid, **({} if e.label is None else {"label": e.label})}
                 for e in examples])
    return read_input_file(FLAGS.input_file, FLAGS.text_column_names or remembered,
                           FLAGS.delimiter, "" if FLAGS.text_column_names else
                           "the model's run read them", pairs)


def run(argv=None):
    define_flags()
    cli.run(main, ["task", "model"], argv)


if __name__ == "__main__":
    run()
