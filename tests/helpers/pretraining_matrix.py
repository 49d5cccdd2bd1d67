"""Runs run_pretraining's main once per (--mixed_precision, --jit_compile) in one process and
prints {"precision-jit": eval results} as JSON (one interpreter start for the whole matrix).

  python tests/helpers/pretraining_matrix.py OUTPUT_ROOT --flag=value ...
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

if __name__ == "__main__":
    import keras
    from absl import flags

    from albert_tf import run_pretraining
    from conftest import PRECISION_MATRIX

    root, common = sys.argv[1], sys.argv[2:]
    results = {}
    for precision, jit in PRECISION_MATRIX:
        out = os.path.join(root, f"{precision}-{jit}")
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["run_pretraining", f"--output_dir={out}", f"--mixed_precision={precision}",
                     f"--jit_compile={jit}"] + common)
        run_pretraining.main(None)
        keras.mixed_precision.set_global_policy("float32")
        with open(os.path.join(out, "eval_results.txt")) as f:
            results[f"{precision}-{jit}"] = dict(line.strip().split(" = ") for line in f)
    print(json.dumps(results))
