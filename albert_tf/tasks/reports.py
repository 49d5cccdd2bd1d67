"""What a classification run shows its user: the data report before training (examples, label
counts, token lengths, the share truncated or how the windows divide among the texts) and,
after evaluation, per-class precision / recall / F1 with macro and weighted averages, the
confusion matrix (a table and confusion_matrix.png) and the worst-scored examples.

The counts are a few lines of numpy: scikit-learn, which has them, is kept out of the install
(Keras imports it whenever it is present, 2 s in every process)."""

import io
import os
import re

import numpy as np
from absl import logging

from albert_tf.files import atomic_write_bytes, atomic_write_text

REPORT_FILE = "classification_report.txt"
CONFUSION_PICTURE = "confusion_matrix.png"
# More classes than this: the picture's cells carry no numbers, and the log leaves the matrix
# to the report file.
MAX_ANNOTATED = 30
CONFUSION_TITLE = "confusion matrix (rows: true label, columns: predicted)"


def data_report(name, token_counts, max_seq_length, label_counts=None, windows=None):
    """One log line per split: examples, label counts, token-length percentiles 50/95/99 and
    the share longer than max_seq_length (truncated, or with `windows` (each example's number
    of windows) read in windows: how many in all, the share of them from the longest 1% of the
    examples and the most from one). Returns the figures."""
    counts = np.asarray(token_counts)
    p50, p95, p99 = (int(np.percentile(counts, q)) for q in (50, 95, 99))
    longer = float(np.mean(counts > max_seq_length))
    labels = ", ".join(f"{k} {v}" for k, v in label_counts.items()) if label_counts else ""
    figures = {"examples": len(counts), "labels": dict(label_counts or {}),
               "tokens_p50": p50, "tokens_p95": p95, "tokens_p99": p99, "longer": longer,
               "windows": None}
    fate = "truncated"
    if windows is not None:
        figures.update(window_division(windows))
        fate = ("read in {windows} windows in all: {longest_share:.1%} of them from the longest "
                "1% of the examples ({longest}), at most {most_windows} from one").format(
                    **figures)
    logging.info("%s: %d examples%s; tokens per example p50 %d, p95 %d, p99 %d; %.1f%% longer "
                 "than --max_seq_length=%d (%s)", name, len(counts),
                 f" ({labels})" if labels else "", p50, p95, p99, 100 * longer,
                 max_seq_length, fate)
    return figures


def window_division(windows):
    """How `windows` (each example's number of windows) divide: the total, the longest 1% of
    the examples (at least one), their share of the windows and the most one example has."""
    windows = np.sort(np.asarray(windows, np.int64))[::-1]
    longest = max(1, len(windows) // 100)
    total = int(windows.sum())
    return {"windows": total, "longest": longest,
            "longest_share": float(windows[:longest].sum() / max(total, 1)),
            "most_windows": int(windows[0]) if len(windows) else 0}


def label_counts(label_ids, names, multi_label=False):
    """{name: examples with it}, in label order."""
    ids = np.asarray(label_ids)
    per_label = ids.sum(0) if multi_label else np.bincount(ids, minlength=len(names))
    return {name: int(n) for name, n in zip(names, per_label)}


def confusion_matrix(labels, predictions, num_labels):
    """[true label, predicted label] counts."""
    index = np.asarray(labels, np.int64) * num_labels + np.asarray(predictions, np.int64)
    return np.bincount(index, minlength=num_labels ** 2).reshape(num_labels, num_labels)


def _scores(tp, predicted, actual):
    """precision, recall, F1 (0 where undefined) from true positives and the predicted and
    actual positive counts."""
    tp, predicted, actual = (np.asarray(x, np.float64) for x in (tp, predicted, actual))
    precision = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall = np.divide(tp, actual, out=np.zeros_like(tp), where=actual > 0)
    f1 = np.divide(2 * tp, predicted + actual, out=np.zeros_like(tp),
                   where=predicted + actual > 0)
    return precision, recall, f1


def _per_class(matrix):
    return _scores(np.diag(matrix), matrix.sum(0), matrix.sum(1)) + (matrix.sum(1),)


def _per_label(labels, predictions):
    labels, predictions = np.asarray(labels) > 0, np.asarray(predictions) > 0
    return _scores((labels & predictions).sum(0), predictions.sum(0), labels.sum(0)) + (
        labels.sum(0),)


def averaged_f1(labels, predictions, num_labels):
    """macro_f1 (classes alike) and weighted_f1 (by support); a class never predicted has F1
    0."""
    _, _, f1, support = _per_class(confusion_matrix(labels, predictions, num_labels))
    return {"macro_f1": float(f1.mean()),
            "weighted_f1": float((f1 * support).sum() / max(support.sum(), 1))}


def f1_per_label(labels, predictions, names, multi_label=False):
    """{f1_<label>: F1} for eval_results.txt and TensorBoard (characters other than letters,
    digits, '-' and '.' in a name become '_')."""
    if multi_label:
        f1 = _per_label(labels, predictions)[2]
    else:
        f1 = _per_class(confusion_matrix(labels, predictions, len(names)))[2]
    return {"f1_" + re.sub(r"[^\w.-]", "_", name): float(v) for name, v in zip(names, f1)}


def multi_label_f1(labels, predictions):
    """micro_f1 (over every label decision) and macro_f1 (labels alike); 0/1 arrays [n, k]."""
    labels, predictions = np.asarray(labels) > 0, np.asarray(predictions) > 0
    _, _, micro = _scores((labels & predictions).sum(), predictions.sum(), labels.sum())
    return {"micro_f1": float(micro), "macro_f1": float(_per_label(labels, predictions)[2].mean())}


def _table(names, precision, recall, f1, support, averages):
    width = max(12, *(len(n) for n in names))
    lines = [f"{'':>{width}} {'precision':>9} {'recall':>9} {'f1-score':>9} {'support':>9}", ""]
    row = "{:>%d} {:>9.4f} {:>9.4f} {:>9.4f} {:>9d}" % width
    lines += [row.format(*r) for r in zip(names, precision, recall, f1, support.astype(int))]
    lines.append("")
    lines += [row.format(*r) for r in averages]
    return "\n".join(lines) + "\n"


def _averages(precision, recall, f1, support):
    weights = support / max(support.sum(), 1)
    total = int(support.sum())
    return [("macro avg", precision.mean(), recall.mean(), f1.mean(), total),
            ("weighted avg", (precision * weights).sum(), (recall * weights).sum(),
             (f1 * weights).sum(), total)]


def classification_report(labels, predictions, names):
    """(text, matrix): per-class precision, recall, F1 and support, accuracy, macro and
    weighted averages, then the confusion matrix (rows: true label, columns: predicted)."""
    matrix = confusion_matrix(labels, predictions, len(names))
    precision, recall, f1, support = _per_class(matrix)
    accuracy = np.trace(matrix) / max(matrix.sum(), 1)
    text = _table(names, precision, recall, f1, support,
                  _averages(precision, recall, f1, support))
    text += f"\naccuracy {accuracy:.4f} on {int(matrix.sum())} examples\n\n"
    width = max(8, *(len(n) for n in names))
    lines = [CONFUSION_TITLE,
             " " * width + "".join(f" {n:>{width}}" for n in names)]
    lines += [f"{n:>{width}}" + "".join(f" {v:>{width}}" for v in row)
              for n, row in zip(names, matrix)]
    return text + "\n".join(lines) + "\n", matrix


def multi_label_report(labels, predictions, names):
    """Per-label precision, recall, F1 and support with micro, macro and weighted averages."""
    labels, predictions = np.asarray(labels) > 0, np.asarray(predictions) > 0
    precision, recall, f1, support = _per_label(labels, predictions)
    micro = _scores((labels & predictions).sum(), predictions.sum(), labels.sum())
    averages = [("micro avg", *(float(x) for x in micro), int(support.sum()))]
    return _table(names, precision, recall, f1, support,
                  averages + _averages(precision, recall, f1, support))


def plot_confusion(matrix, names, path):
    """The confusion matrix as a picture (needs matplotlib: `pip install matplotlib`)."""
    try:
        # optional: the picture is an extra beside the text table. A Figure of its own, not
        # pyplot's, draws without choosing the process's backend.
        from matplotlib.figure import Figure
    except ImportError:
        logging.warning("No %s: matplotlib is not installed (pip install matplotlib)",
                        os.path.basename(path))
        return None
    many = len(names) > MAX_ANNOTATED  # (IFLYTEK's 119: 14,161 numbers took a minute to draw)
    size = 2 + 0.6 * min(len(names), MAX_ANNOTATED)
    figure = Figure(figsize=(size + 1, size))
    axes = figure.subplots()
    axes.imshow(matrix, cmap="Blues")
    ticks = range(len(names))
    axes.set_xticks(ticks, list(names), rotation=45 if len(names) > 4 else 0,
                    fontsize=4 if many else None)
    axes.set_yticks(ticks, list(names), fontsize=4 if many else None)
    axes.set_xlabel("predicted label")
    axes.set_ylabel("true label")
    for (i, j), value in ([] if many else np.ndenumerate(matrix)):
        axes.text(j, i, str(value), ha="center", va="center",
                  color="white" if value > matrix.max() / 2 else "black")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def write_report(output_dir, name, text, step):
    path = os.path.join(output_dir, REPORT_FILE if name == "dev" else
                        f"classification_report_{name}.txt")
    atomic_write_text(path, f"{name} at step {step}\n\n{text}")
    table, matrix = text.split(CONFUSION_TITLE, 1) if CONFUSION_TITLE in text else (text, "")
    classes = matrix.count("\n") - 2  # after the title: its header line, a row a class
    if classes > MAX_ANNOTATED:
        text = f"{table}(its confusion matrix, {classes} classes: in {path})\n"
    logging.info("%s at step %d:\n%s", name, step, text)
    return path
