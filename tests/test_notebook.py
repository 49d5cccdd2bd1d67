"""notebooks/fine_tune_glue.ipynb runs top to bottom headless (nbclient), so it cannot rot:
it fine-tunes, evaluates, predicts from its export and draws the curves inline."""

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # end to end: the full suite runs it, `-m "not slow"` not

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "notebooks", "fine_tune_glue.ipynb")


def test_the_notebook_carries_no_outputs():
    with open(NOTEBOOK, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_the_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    # The demo's model is absent from a fresh clone: the notebook's own fallback is what runs.
    monkeypatch.setenv("NOTEBOOK_ROOT", ROOT)
    monkeypatch.setenv("NOTEBOOK_OUTPUT", str(tmp_path / "work"))
    monkeypatch.setenv("NOTEBOOK_STEPS", "30")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code"
                     for o in c.outputs if o.output_type == "stream")
    assert ": precision " in text and "XLA" in text
    results = next(line for line in text.splitlines() if line.startswith("{'"))
    best = eval(results)  # noqa: S307 (the notebook's own printed dict)
    assert best["global_step"] in (10, 20, 30) and 0.0 <= best["eval_accuracy"] <= 1.0, best
    predictions = [line.split() for line in text.splitlines()
                   if line[:3].strip() in ("0", "1")]
    assert len(predictions) == 3, text
    assert all(0.5 <= float(p[1]) <= 1.0 for p in predictions)
    images = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "display_data" and "image/png" in o.get("data", {})]
    assert len(images) == 1
    assert os.path.exists(tmp_path / "work" / "export" / "saved_model.pb")
    assert os.path.exists(tmp_path / "work" / "finetuned" / "model.ckpt-best.index")
    assert os.path.exists(tmp_path / "work" / "finetuned" / "model.ckpt-30.index")
