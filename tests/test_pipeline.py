import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.pipeline import check_record_lengths, expand_file_patterns, pretraining_dataset
from conftest import write_pretraining_records


def test_batches_have_model_names_and_int32(tmp_path):
    path = write_pretraining_records(tmp_path / "a.tfrecord", 20)
    batch = next(iter(pretraining_dataset(path, 8, 16, 4, is_training=True, seed=1)))
    assert set(batch) == {"input_word_ids", "input_mask", "input_type_ids", "token_boundary",
                          "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                          "next_sentence_labels"}
    assert batch["input_word_ids"].shape == (8, 16) and batch["input_word_ids"].dtype == tf.int32
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (8, 1)
    np.testing.assert_array_equal(batch["input_word_ids"][:, 0], 2)


def test_eval_reads_each_record_once_in_full_batches(tmp_path):
    path = write_pretraining_records(tmp_path / "a.tfrecord", 20)
    batches = list(pretraining_dataset(path, 8, 16, 4, is_training=False))
    assert len(batches) == 2  # 20 records, drop_remainder


def test_files_are_sharded_per_worker(tmp_path):
    for i in range(4):
        write_pretraining_records(tmp_path / f"s{i}.tfrecord", 4, seed=i)
    pattern = str(tmp_path / "s*.tfrecord")
    seen = []
    for worker in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=worker,
                                             num_replicas_in_sync=2)
        ds = pretraining_dataset(pattern, 1, 16, 4, is_training=False, input_context=context)
        seen.append({tuple(b["input_word_ids"].numpy()[0]) for b in ds})
    assert len(seen[0]) == len(seen[1]) == 8 and not seen[0] & seen[1]


def test_wrong_lengths_and_globs_are_clear_errors(tmp_path):
    path = write_pretraining_records(tmp_path / "a.tfrecord", 4)
    with pytest.raises(ValueError, match="'input_ids' has length 16 but --max_seq_length"):
        pretraining_dataset(path, 2, 128, 4)
    with pytest.raises(ValueError, match="--max_predictions_per_seq"):
        pretraining_dataset(path, 2, 16, 20)
    with pytest.raises(FileNotFoundError) as e:
        expand_file_patterns(str(tmp_path / "missing-*.tfrecord"))
    assert str(e.value) == f"--input_file: no file matches '{tmp_path}/missing-*.tfrecord'"
    with pytest.raises(ValueError) as e:  # a directory: one line, not TensorFlow's traceback
        expand_file_patterns(str(tmp_path))
    assert str(e.value) == (f"--input_file={tmp_path} names the directory {tmp_path}: give its "
                            f"record files ('{tmp_path}/*', say)")
    # The builder's shards of a --output_file with several inputs: named, with the glob.
    for i in range(2):
        write_pretraining_records(tmp_path / f"train.tfrecord-0000{i}-of-00002", 2)
    with pytest.raises(FileNotFoundError) as e:
        expand_file_patterns(str(tmp_path / "train.tfrecord"))
    assert str(e.value) == (f"--input_file: no file matches '{tmp_path}/train.tfrecord' (the "
                            f"builder wrote 2 shards of it: --input_file="
                            f"'{tmp_path}/train.tfrecord-*')")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="holds no records"):
        pretraining_dataset(str(empty), 2, 16, 4)


def test_compressed_records_get_a_hint(tmp_path):
    plain = write_pretraining_records(tmp_path / "plain.tfrecord", 2)
    packed = str(tmp_path / "train.tfrecord.gz")
    with tf.io.TFRecordWriter(packed, options="GZIP") as writer:
        for record in tf.data.TFRecordDataset(plain):
            writer.write(record.numpy())
    with pytest.raises(ValueError, match=r"train.tfrecord.gz is not a TFRecord file \(.*\): it "
                                         r"is gzip-compressed.*decompress it first \(gunzip\)"):
        check_record_lengths(packed, 16, 4)
    check_record_lengths(plain, 16, 4)  # plain records pass
