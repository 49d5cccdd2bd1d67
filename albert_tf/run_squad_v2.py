"""The original run_squad_v2.py command line: SQuAD v2.0 with `albert_tf.run_squad`, the
module being the version (no --version_2_with_negative needed). Every flag of run_squad
applies.
"""

from albert_tf.startup import start_tool

if __name__ == "__main__":
    start_tool()  # before TensorFlow loads

from albert_tf import run_squad


def run(argv=None):
    run_squad.run(argv, version_2=True)


if __name__ == "__main__":
    run()
