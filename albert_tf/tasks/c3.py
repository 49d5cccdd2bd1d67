"""C3 fine-tuning (CLUE's multiple-choice reading comprehension) on the RACE path: the same
4-choice model and trainer, accuracy per subset (dialogue, mixed), and CLUE's submission file."""

import json
import os

import numpy as np
from absl import logging

from albert_tf.data import c3
from albert_tf.files import atomic_write_text
from albert_tf.tasks.race import RaceTask, answered_accuracies


class C3Task(RaceTask):
    name = "c3"

    def __init__(self, data_dir, tokenizer, max_seq_length, max_qa_length, cache_dir,
                 dropout_prob=0.1, feature_files=None):
        super().__init__(data_dir, tokenizer, max_seq_length, max_qa_length, cache_dir,
                         dropout_prob=dropout_prob, feature_files=feature_files)
        self.levels = c3.LEVELS

    def data_digest(self, split):
        return c3.digest(self.data_dir, split)

    def read(self, split):
        return c3.read_examples(self.data_dir, split)

    def cache_stem(self, split):
        return "c3_" + split

    def write_predictions(self, name, features, outputs, output_dir):
        """<name>_predictions.jsonl (id, subset, the chosen index, the answer's where known,
        probabilities), predict_results.txt where the questions have answers, and CLUE's
        submission (c311_predict.json for test1.1.json: {"id": n, "label": index} per question,
        n counting the questions in file order, as CLUE's baseline writes it)."""
        result, answered = answered_accuracies(features, outputs, output_dir)
        chosen = np.argmax(outputs["probabilities"], -1)
        lines = [json.dumps({"id": str(guid), "subset": str(level), "prediction": int(choice),
                             "answer": int(label) if known else None,
                             "probabilities": [round(float(p), 6) for p in probs]})
                 for guid, level, choice, label, known, probs in zip(
                     features["guids"], features["levels"], chosen, features["label_ids"],
                     answered, outputs["probabilities"])]
        atomic_write_text(os.path.join(output_dir, f"{name}_predictions.jsonl"),
                          "".join(line + "\n" for line in lines))
        submission = os.path.join(output_dir, c3.submission_name(self.data_dir))
        atomic_write_text(submission, "".join(json.dumps({"id": n, "label": int(choice)}) + "\n"
                                              for n, choice in enumerate(chosen)))
        logging.info("C3 %s: %d predictions in %s%s", name, len(lines), submission, "".join(
            f"; {k} {v:.4f}" for k, v in sorted(result.items())))
        return result
