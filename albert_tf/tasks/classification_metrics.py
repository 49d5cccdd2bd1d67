"""The metrics of sentence classification and regression: accuracy and loss, Matthews
correlation, F1 of one class, Pearson and Spearman correlation."""

import numpy as np


def classification_metrics(labels, outputs, regression):
    """eval_loss, and eval_accuracy; regression: pearson, spearman and MSE."""
    result = {"eval_loss": float(np.mean(outputs["per_example_loss"]))}
    if regression:
        predictions = outputs["predictions"]
        result.update(pearson=pearson(predictions, labels), spearman=spearman(predictions, labels),
                      MSE=float(np.mean((predictions - labels) ** 2)))
        return result
    result["eval_accuracy"] = float(np.mean(np.argmax(outputs["logits"], -1) == labels))
    return result


def matthews_corrcoef(labels, predictions):
    tp = float(np.sum((predictions == 1) & (labels == 1)))
    tn = float(np.sum((predictions == 0) & (labels == 0)))
    fp = float(np.sum((predictions == 1) & (labels == 0)))
    fn = float(np.sum((predictions == 0) & (labels == 1)))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def f1_score(labels, predictions, positive=1):
    tp = float(np.sum((predictions == positive) & (labels == positive)))
    fp = float(np.sum((predictions == positive) & (labels != positive)))
    fn = float(np.sum((predictions != positive) & (labels == positive)))
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def pearson(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x, y = x - x.mean(), y - y.mean()
    denominator = np.sqrt((x * x).sum() * (y * y).sum())
    return float((x * y).sum() / denominator) if denominator else 0.0


def _ranks(x):
    """Ranks with ties given their average rank."""
    x = np.asarray(x)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(x, y):
    return pearson(_ranks(x), _ranks(y))
