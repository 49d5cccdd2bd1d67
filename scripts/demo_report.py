"""What the demo learned, in a form a person can see.

  python scripts/demo_report.py curves PRETRAIN_DIR PNG
      training and held-out curves (MLM loss and accuracy, SOP accuracy) from the run's own
      TensorBoard summaries, as one PNG.
  python scripts/demo_report.py initial CONFIG OUT_DIR
      the model before pretraining (its random initialisation), as a checkpoint.
  python scripts/demo_report.py fill_mask BEFORE_DIR AFTER_DIR SPM_MODEL
      fill-mask on a few sentences from the novels' world: the right word's rank and
      probability before and after pretraining, and the top 5 after.
  python scripts/demo_report.py finetune RESULTS_FILE TRAIN_TSV
      the fine-tuned dev accuracy next to the majority-class baseline.
  python scripts/demo_report.py all DEMO_DIR CONFIG TRAIN_TSV
      all of the above for the demo's folder, in one process.
"""

import collections
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from albert_tf.startup import quiet_stderr  # noqa: E402

if __name__ == "__main__":
    quiet_stderr()

from albert_tf.formats.resolve import run_checkpoint  # noqa: E402
from albert_tf.training.excursions import read_log  # noqa: E402
from albert_tf.training.results import read_scalars  # noqa: E402

# Each sentence with the word its [MASK] hides, in the three training novels' world.
SENTENCES = [
    ('"Thank [MASK]," said she.', "you"),
    ('"It is very true," [MASK] she.', "said"),
    ("I do not [MASK] what you mean.", "know"),
    ("I am [MASK] sure of it.", "very"),
    ('"My dear Mr. [MASK]," said his lady to him one day.', "bennet"),
]
PANELS = [("masked_lm_loss", "MLM loss"), ("masked_lm_accuracy", "MLM accuracy"),
          ("sentence_order_accuracy", "SOP accuracy")]


def plot_curves(pretrain_dir, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {name: read_scalars(os.path.join(pretrain_dir, name)) for name in ("train", "eval")}
    if not any(runs.values()):
        raise SystemExit(f"no TensorBoard summaries under {pretrain_dir}/train or /eval")
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.4))
    for ax, (tag, title) in zip(axes, PANELS):
        for name, style in (("train", "-"), ("eval", "o-")):
            points = runs[name].get(tag)
            if points:
                steps, values = zip(*points)
                ax.plot(steps, values, style, label="held-out" if name == "eval" else name)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    return runs


def write_initial(config_path, out_dir, seed=12345):
    import keras
    from albert_tf import AlbertConfig, AlbertPretrainer
    keras.utils.set_random_seed(seed)
    AlbertPretrainer(AlbertConfig.from_json_file(config_path)).save_pretrained(out_dir)


def fill_mask_ranks(model_dir, spm_model, sentences=SENTENCES):
    """[(rank of the right word (1 = top), its probability, top-5 words)] per sentence, among
    words: the pieces' texts, each once (a word-start and a continuation piece spell "i" alike),
    without the bare word-start piece "▁" (no word of its own)."""
    from albert_tf.serving.fill_mask import FillMask
    predictor = FillMask(model_dir, top_k=10 ** 6, spm_model_file=spm_model)
    results = predictor([text for text, _ in sentences])
    out = []
    for (text, answer), result in zip(sentences, results):
        found = {}
        for p in result["masks"][0]["predictions"]:
            if p["text"].strip():
                found.setdefault(p["text"].lower(), p["probability"])
        words = list(found)
        rank = words.index(answer) + 1 if answer in found else None
        out.append((rank, found.get(answer, 0.0), words[:5]))
    return out


def show_fill_mask(before_dir, after_dir, spm_model, sentences=SENTENCES):
    before = fill_mask_ranks(before_dir, spm_model, sentences)
    after = fill_mask_ranks(after_dir, spm_model, sentences)
    lines = []
    for (text, answer), (rank0, p0, _), (rank1, p1, top) in zip(sentences, before, after):
        gain = f", {p1 / p0:.0f}x as likely" if p0 and p1 else ""
        lines.append(f"  {text}\n    '{answer}': rank {rank0} (p={p0:.5f}) before pretraining → "
                     f"rank {rank1} (p={p1:.4f}) after{gain}; top 5 now: {', '.join(top)}")
    climbed = sum(1 for rank1, _, _ in after if rank1 and rank1 <= 5)
    lines.append(f"  The right word is in the top 5 for {climbed} of {len(sentences)} sentences "
                 f"after pretraining.")
    return "\n".join(lines), before, after


def finetune_summary(results_file, train_tsv):
    results = read_results(results_file)
    with open(train_tsv) as f:
        labels = [row.rstrip("\n").split("\t")[-1] for row in f.readlines()[1:]]
    counts = collections.Counter(labels)
    label, count = counts.most_common(1)[0]
    baseline = count / len(labels)
    accuracy = results["eval_accuracy"]
    verdict = (f": {accuracy - baseline:+.3f}, it learned the task" if accuracy >= baseline + 0.02
               else ": no better, so it learned nothing of the task yet; a longer run learns it "
                    "(more DEMO_MINUTES, or DEMO_STEPS)")
    return (f"  dev accuracy {accuracy:.3f} against {baseline:.3f} for always answering the most "
            f"frequent training label ({label!r}){verdict}"), accuracy, baseline


def read_results(path):
    with open(path) as f:
        return {k.strip(): float(v) for k, v in (line.split("=", 1) for line in f if "=" in line)}


def excursions_summary(pretrain_dir):
    """The run's loss excursions and how each was recovered, from its excursions.json."""
    recoveries = read_log(pretrain_dir)
    if not recoveries:
        return "  No loss excursion: the training loss never spiked or kept rising."
    return "\n".join(
        f"  Excursion {r['number']} ({r['kind']}) seen at step {r['detected_at_step']}: back to "
        f"step {r['rolled_back_to_step']}, past {r['skipped_batches']} batches, learning rate "
        f"x{r['lr_scale']:g}." for r in recoveries)


def report_all(demo_dir, config_path, train_tsv):
    png = os.path.join(demo_dir, "curves.png")
    pretrained = os.path.join(demo_dir, "pretrained")
    plot_curves(pretrained, png)
    held_out = read_results(os.path.join(pretrained, "eval_results.txt"))
    print(f"Pretraining, held-out novel at step {int(held_out['global_step'])}: masked-LM "
          f"accuracy {held_out['masked_lm_accuracy']:.3f} (one of 8000 pieces), sentence-order "
          f"accuracy {held_out['sentence_order_accuracy']:.3f} (chance 0.5).")
    print(excursions_summary(pretrained))
    prefix, why = run_checkpoint(pretrained)
    print(f"  Fine-tuning, the exports and fill-mask start from {os.path.basename(prefix)}: "
          f"{why}.")
    print(f"Curves (training and held-out MLM loss, MLM accuracy, SOP accuracy): {png}")
    initial = os.path.join(demo_dir, "initial")
    write_initial(config_path, initial)
    print("\nFill-mask, before pretraining (random weights) and after:")
    print(show_fill_mask(initial, os.path.join(demo_dir, "pretrained"),
                         os.path.join(demo_dir, "spm.model"))[0])
    print("\nFine-tuning (best dev checkpoint):")
    print(finetune_summary(os.path.join(demo_dir, "finetuned", "eval_results.txt"), train_tsv)[0])


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "all":
        report_all(*args)
        return
    if what == "curves":
        plot_curves(*args)
        print(f"  curves of training and held-out MLM loss, MLM accuracy and SOP accuracy: "
              f"{args[1]}")
    elif what == "initial":
        write_initial(*args)
    elif what == "fill_mask":
        print(show_fill_mask(*args)[0])
    elif what == "finetune":
        print(finetune_summary(*args)[0])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
