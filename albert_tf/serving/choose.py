"""Multiple choice: the option a fine-tuned RACE or C3 model picks for each question about an
article, read at the lengths its run read (run.json: max_seq_length, max_qa_length)."""

import collections

import numpy as np

from albert_tf.data import race
from albert_tf.serving.predictor import (PredictError, Predictor, batches, inference_function,
                                         pad_batch)
from albert_tf.training.checkpoint_files import CHOICE_RUN_KINDS, recorded_kind

DEFAULT_MAX_QA_LENGTH = 128  # run_race's


class Chooser(Predictor):
    """Picks among each question's options with a run_race output_dir (or a checkpoint in it):

        Chooser("out/race")([race.Example(guid, "", article, question, options, -1), ...])
        → [{"question": ..., "prediction": "B", "probabilities": [...]}, ...]

    A question may have any number of options (two or more); its probabilities are over them.
    """

    def __init__(self, model, max_qa_length=None, **kwargs):
        super().__init__(model, **kwargs)
        path, kind = self.source.path, self.source.kind
        if kind != "checkpoint":
            raise PredictError(f"{path} is a {kind} export: --task=choose reads a run_race "
                               f"output_dir (or a checkpoint in it)")
        run_kind = recorded_kind(self.source.directory)
        if run_kind not in CHOICE_RUN_KINDS:
            raise PredictError(f"{path} is no multiple-choice run ("
                               f"{run_kind or 'no run.json beside it'}): --task=choose reads a "
                               f"run_race output_dir (or a checkpoint in it)")
        self.max_qa_length = int(max_qa_length or self.run_settings.get("max_qa_length")
                                 or DEFAULT_MAX_QA_LENGTH)
        try:
            race.check_lengths(self.max_seq_length, self.max_qa_length)
        except ValueError as e:
            raise PredictError(str(e)) from None
        from albert_tf.modeling.multiple_choice import AlbertMultipleChoice
        self._model = inference_function(self.source.build(AlbertMultipleChoice))

    def __call__(self, questions, texts_b=None):
        """One result per question (`race.Example`s), in their order."""
        if texts_b is not None:
            raise PredictError("--task=choose takes questions (article, question, options), "
                               "not pairs of texts")
        by_count = collections.defaultdict(list)  # a batch's questions have as many options
        for i, question in enumerate(questions):
            by_count[len(question.options)].append(i)
        results = [None] * len(questions)
        for count, indices in by_count.items():
            for part in batches(len(indices), self.batch_size):
                chosen = [questions[i] for i in indices[part]]
                inputs = pad_batch([row for q in chosen for row in self._encode_choices(q)])
                inputs = {k: v.reshape(len(chosen), count, -1) for k, v in inputs.items()}
                probabilities = np.asarray(self._model(inputs)["probabilities"])
                for i, q, p in zip(indices[part], chosen, probabilities):
                    results[i] = {"question": q.question,
                                  "prediction": race.letter(int(np.argmax(p))),
                                  "probabilities": [round(float(x), 6) for x in p]}
        return results

    def _encode_choices(self, question):
        """Each option's [CLS] article [SEP] question+option [SEP] ids, as run_race reads them."""
        tokenizer = self.tokenizer
        article = tokenizer.encode(question.article)
        return [race.choice_ids(article, tokenizer.encode(race.combine(question.question, o)),
                                self.cls_id, self.sep_id, self.max_seq_length,
                                self.max_qa_length) for o in question.options]
