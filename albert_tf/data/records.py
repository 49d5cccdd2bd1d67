"""The pretraining TFRecord schema, a vectorised tf.train.Example serializer and a TFRecord writer.

The schema is the original `create_pretraining_data.py`'s, so records from either builder train
either trainer. Serializing and framing are done with numpy, without importing TensorFlow.
"""

import os

import numpy as np

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "token_boundary",
                 "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels")


def pretraining_feature_lengths(max_seq_length, max_predictions_per_seq, do_permutation=False):
    """{name: (dtype, length)} of one record; dtype is "int64" or "float32"."""
    targets = max_predictions_per_seq * (1 + int(do_permutation))
    return {
        "input_ids": ("int64", max_seq_length),
        "input_mask": ("int64", max_seq_length),
        "segment_ids": ("int64", max_seq_length),
        "token_boundary": ("int64", max_seq_length),
        "masked_lm_positions": ("int64", targets),
        "masked_lm_ids": ("int64", targets),
        "masked_lm_weights": ("float32", targets),
        "next_sentence_labels": ("int64", 1),
    }


def pretraining_feature_spec(max_seq_length, max_predictions_per_seq, do_permutation=False):
    """A `tf.io.parse_example` spec for the pretraining records."""
    import tensorflow as tf

    dtypes = {"int64": tf.int64, "float32": tf.float32}
    return {name: tf.io.FixedLenFeature([length], dtypes[dtype])
            for name, (dtype, length) in pretraining_feature_lengths(
                max_seq_length, max_predictions_per_seq, do_permutation).items()}


# ----------------------------------------------------------------------------------------
# Protobuf encoding. Example{features: Features{feature: map<string, Feature>}}; a map entry
# is {key: 1, value: 2}; Feature{float_list: 2, int64_list: 3}; each list is {packed value: 1}.


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(tag, payload_len):
    return bytes([tag]) + _varint(payload_len)


class _EntryHeaders:
    """Cached bytes that precede a feature's packed payload, keyed by payload length."""

    def __init__(self, name, list_tag):
        self.key = _len_field(0x0A, len(name)) + name.encode()
        self.list_tag = list_tag
        self.cache = {}

    def __call__(self, n):
        h = self.cache.get(n)
        if h is None:
            values = _len_field(0x0A, n)                                  # packed values
            feature = _len_field(self.list_tag, len(values) + n) + values  # Int64List/FloatList
            value = _len_field(0x12, len(feature) + n) + feature           # map value
            entry_len = len(self.key) + len(value) + n
            h = self.cache[n] = _len_field(0x0A, entry_len) + self.key + value
        return h


def _varint_bytes(values):
    """Varint encoding of a non-negative int matrix: (flat uint8 bytes in row order, bytes per value)."""
    if values.size and values.min() < 0:
        raise ValueError("negative values cannot be serialized as features here")
    v = values.ravel()
    v = v.astype(np.uint32 if (not v.size or v.max() < 2**32) else np.uint64)
    nbytes = np.ones(v.shape, dtype=np.int32)
    for k in range(1, 10):
        more = v >= (1 << (7 * k))
        if not more.any():
            break
        nbytes += more
    first = np.cumsum(nbytes) - nbytes
    out = np.empty(int(nbytes.sum()), dtype=np.uint8)
    seven, low = v.dtype.type(7), v.dtype.type(0x7F)
    out[first] = (v & low).astype(np.uint8) | ((nbytes > 1).astype(np.uint8) << 7)
    for k in range(1, int(nbytes.max(initial=1))):
        sel = np.nonzero(nbytes > k)[0]
        group = ((v[sel] >> (seven * v.dtype.type(k))) & low).astype(np.uint8)
        out[first[sel] + k] = group | ((nbytes[sel] > k + 1).astype(np.uint8) << 7)
    return out, nbytes.reshape(values.shape)


class ExampleSerializer:
    """Serializes batches of fixed-length features into tf.train.Example bytes."""

    def __init__(self, lengths):
        self.lengths = dict(lengths)
        self.headers = {name: _EntryHeaders(name, 0x12 if dtype == "float32" else 0x1A)
                        for name, (dtype, _) in self.lengths.items()}

    def serialize(self, features):
        """features: {name: array [batch, length]} → list of serialized Examples."""
        names = list(self.lengths)
        batch = len(features[names[0]])
        columns = []  # per feature: (flat bytes, per-row offsets as a list)
        for n in names:
            dtype, length = self.lengths[n]
            x = np.asarray(features[n])
            if x.shape != (batch, length):
                raise ValueError(f"feature {n} has shape {x.shape}, expected {(batch, length)}")
            if dtype == "float32":
                flat = np.ascontiguousarray(x, dtype="<f4").tobytes()
                offsets = range(0, 4 * length * (batch + 1), 4 * length)
            elif x.size and (x.min() < 0 or x.max() >= 128):
                flat, nbytes = _varint_bytes(x)
                flat = flat.tobytes()
                offsets = np.concatenate([[0], np.cumsum(nbytes.sum(1))]).tolist()
            else:  # every value is one byte
                flat = np.ascontiguousarray(x, dtype=np.uint8).tobytes()
                offsets = range(0, length * (batch + 1), length)
            columns.append((self.headers[n], flat, offsets))
        out = []
        for b in range(batch):
            parts = []
            for header, flat, offsets in columns:
                lo, hi = offsets[b], offsets[b + 1]
                parts.append(header(hi - lo))
                parts.append(flat[lo:hi])
            body = b"".join(parts)
            out.append(_len_field(0x0A, len(body)) + body)
        return out


# ----------------------------------------------------------------------------------------
# TFRecord framing: uint64 length, masked crc32c(length), data, masked crc32c(data).


def _crc32c_table():
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


_CRC_TABLE = _crc32c_table()


def masked_crc32c(records):
    """Masked CRC32C of each bytes object, computed for the whole batch at once."""
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    width = int(lengths.max()) if len(records) else 0
    data = np.zeros((len(records), width), dtype=np.uint8)
    flat = np.frombuffer(b"".join(records), dtype=np.uint8)
    mask = np.arange(width)[None, :] < lengths[:, None]
    data[mask] = flat
    crc = np.full(len(records), 0xFFFFFFFF, dtype=np.uint32)
    # Columns are processed together; rows shorter than a column keep their CRC.
    order = np.argsort(-lengths, kind="stable")
    columns = np.ascontiguousarray(data[order].T)
    sorted_len = lengths[order]
    active = len(records)
    table = _CRC_TABLE
    c = crc
    for j in range(width):
        while active and sorted_len[active - 1] <= j:
            active -= 1
        cj = c[:active]
        c[:active] = table[(cj ^ columns[j, :active]) & 0xFF] ^ (cj >> np.uint32(8))
    c = c ^ np.uint32(0xFFFFFFFF)
    result = np.empty_like(c)
    result[order] = c
    rotated = ((result >> np.uint32(15)) | (result << np.uint32(17))) & np.uint32(0xFFFFFFFF)
    return (rotated + np.uint32(0xA282EAD8)).astype(np.uint32)


def frame_records(records):
    """TFRecord bytes for a batch of serialized records."""
    if not records:
        return b""
    lengths = np.array([len(r) for r in records], dtype="<u8")
    length_bytes = [x.tobytes() for x in lengths]
    len_crc = masked_crc32c(length_bytes).astype("<u4")
    data_crc = masked_crc32c(records).astype("<u4")
    parts = []
    for lb, lc, rec, dc in zip(length_bytes, len_crc.tolist(), records, data_crc.tolist()):
        parts.append(lb)
        parts.append(lc.to_bytes(4, "little"))
        parts.append(rec)
        parts.append(dc.to_bytes(4, "little"))
    return b"".join(parts)


class AtomicTFRecordWriter:
    """Writes TFRecords to `path + '.incomplete'` and renames it to `path` on success."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.tmp_path = self.path + ".incomplete"
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._file = open(self.tmp_path, "wb")
        self.count = 0
        self.bytes = 0

    def write_batch(self, records):
        data = frame_records(records)
        self._file.write(data)
        self.count += len(records)
        self.bytes += len(data)

    def close(self):
        self._file.close()
        os.replace(self.tmp_path, self.path)

    def abort(self):
        self._file.close()
        if os.path.exists(self.tmp_path):
            os.remove(self.tmp_path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
