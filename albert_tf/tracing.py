"""tf.function as this package traces: without AutoGraph.

Our traced code writes its loops and conditions as TensorFlow ops (tf.while_loop, tf.where),
so AutoGraph has nothing to convert; left on, it parses and rewrites the source of every
Python function a traced function calls, tensorflow_text's included, on each process's first
trace (bench/bench_startup.py measures it). The input pipelines' parsing, masking and
padding functions, which tf.data's `map` would convert too, are marked
`tf.autograph.experimental.do_not_convert`.
"""

import functools

import tensorflow as tf

graph_function = functools.partial(tf.function, autograph=False)
