"""Runs an albert_tf entry point with N logical CPU devices (for MirroredStrategy on a CPU).

  python tests/helpers/run_with_cpu_devices.py 2 albert_tf.run_pretraining --flag=...
"""
import importlib
import sys

import tensorflow as tf

if __name__ == "__main__":
    count, module = int(sys.argv[1]), sys.argv[2]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    sys.argv = [module] + sys.argv[3:]
    importlib.import_module(module).run()
