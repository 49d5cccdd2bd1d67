"""The pretraining TFRecord schema, a vectorised tf.train.Example serializer and a TFRecord writer.

The schema is the original `create_pretraining_data.py`'s, so records from either builder train
either trainer. Serializing and framing are done with numpy, without importing TensorFlow.
"""

import contextlib
import os

import numpy as np

from albert_tf.outputs import make_parent_dir

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "token_boundary",
                 "masked_lm_positions", "masked_lm_ids", "masked_lm_weights",
                 "next_sentence_labels")

# Written by create_pretraining_data into every record beside the schema's features (their
# parsers, the original's too, read only the features they name): FullTokenizer.fingerprint.
VOCAB_FINGERPRINT = "vocab_fingerprint"


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


def _varint_matrix(values):
    """Varint bytes of a non-negative int matrix: (groups [..., width] uint8, bytes per value)."""
    v = values.astype(np.uint64)
    nbytes = np.ones(v.shape, dtype=np.int64)
    for k in range(1, 10):
        more = v >= np.uint64(1 << (7 * k))
        if not more.any():
            break
        nbytes += more
    width = int(nbytes.max(initial=1))
    groups = np.empty(v.shape + (width,), dtype=np.uint8)
    for k in range(width):
        low = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        groups[..., k] = low | ((nbytes > k + 1).astype(np.uint8) << 7)
    return groups, nbytes


def _scatter(out, dst_starts, src, src_starts, lengths):
    """Copies variable-length segments src[src_start:+len] to out[dst_start:+len], all at once."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return
    rel = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[np.repeat(dst_starts, lengths) + rel] = src[np.repeat(src_starts, lengths) + rel]


class Batch:
    """Serialized records as one uint8 buffer; record i is buffer[offsets[i]:offsets[i + 1]]."""

    def __init__(self, buffer, offsets):
        self.buffer, self.offsets = buffer, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def to_list(self):
        data = self.buffer.tobytes()
        o = self.offsets.tolist()
        return [data[o[i]:o[i + 1]] for i in range(len(self))]

    def take(self, index):
        """The records at `index` (an int array), as a new Batch."""
        lengths = np.diff(self.offsets)[index]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        buffer = np.empty(int(offsets[-1]), dtype=np.uint8)
        _scatter(buffer, offsets[:-1], self.buffer, self.offsets[:-1][index], lengths)
        return Batch(buffer, offsets)

    @classmethod
    def from_list(cls, records):
        lengths = [len(r) for r in records]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return cls(np.frombuffer(b"".join(records), dtype=np.uint8), offsets)


class ExampleSerializer:
    """Serializes batches of fixed-length features into tf.train.Example bytes, vectorised."""

    def __init__(self, lengths):
        self.lengths = dict(lengths)
        self.headers = {name: _EntryHeaders(name, 0x12 if dtype == "float32" else 0x1A)
                        for name, (dtype, _) in self.lengths.items()}

    def _payload_block(self, name, x):
        """(bytes [batch, width], valid [batch, width] or None) of one feature's packed values."""
        dtype, length = self.lengths[name]
        batch = len(x)
        if dtype == "float32":
            return np.ascontiguousarray(x, dtype="<f4").view(np.uint8).reshape(batch, -1), None
        if x.size and (x.min() < 0 or x.max() >= 128):
            groups, nbytes = _varint_matrix(x)
            width = groups.shape[-1]
            valid = np.arange(width)[None, None, :] < nbytes[..., None]
            return groups.reshape(batch, -1), valid.reshape(batch, -1)
        return np.ascontiguousarray(x, dtype=np.uint8), None  # every value is one byte

    def serialize_batch(self, features):
        """features: {name: array [batch, length]} → a `Batch` of serialized Examples.

        Every part of every record is laid out in one padded matrix; a validity mask then
        compresses it into the concatenated records in a single pass.
        """
        names = list(self.lengths)
        batch = len(features[names[0]])
        blocks = []  # (bytes [batch, width], valid [batch, width] or None)
        body = np.zeros(batch, dtype=np.int64)
        for n in names:
            x = np.asarray(features[n])
            if x.shape != (batch, self.lengths[n][1]):
                raise ValueError(f"feature {n} has shape {x.shape}, "
                                 f"expected {(batch, self.lengths[n][1])}")
            payload, valid = self._payload_block(n, x)
            if valid is None:
                sizes = np.full(batch, payload.shape[1], dtype=np.int64)
                unique, keys = sizes[:1], np.zeros(batch, dtype=np.int64)
            else:
                sizes = valid.sum(1)
                unique, keys = np.unique(sizes, return_inverse=True)
            headers = [self.headers[n](int(u)) for u in unique]
            width = max(len(h) for h in headers)
            table = np.zeros((len(headers), width), dtype=np.uint8)
            for i, h in enumerate(headers):
                table[i, :len(h)] = np.frombuffer(h, dtype=np.uint8)
            header_len = np.array([len(h) for h in headers], dtype=np.int64)[keys]
            blocks.append((table[keys], np.arange(width)[None, :] < header_len[:, None]))
            blocks.append((payload, valid))
            body += header_len + sizes
        outer_len = 2 + sum((body >= (1 << (7 * k))).astype(np.int64) for k in range(1, 5))
        outer = np.zeros((batch, 6), dtype=np.uint8)
        outer[:, 0] = 0x0A
        for k in range(5):
            more = (outer_len - 1 > k + 1).astype(np.uint8) << 7
            outer[:, k + 1] = ((body >> (7 * k)) & 0x7F).astype(np.uint8) | more
        blocks.insert(0, (outer, np.arange(6)[None, :] < outer_len[:, None]))
        matrix = np.concatenate([blk for blk, _ in blocks], axis=1)
        valid = np.concatenate([np.ones(blk.shape, bool) if v is None else v
                                for blk, v in blocks], axis=1)
        sizes = outer_len + body
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return Batch(matrix[valid], offsets)

    def serialize(self, features):
        """features: {name: array [batch, length]} → list of serialized Examples (bytes)."""
        return self.serialize_batch(features).to_list()


# ----------------------------------------------------------------------------------------
# TFRecord framing: uint64 length, masked crc32c(length), data, masked crc32c(data).


def _crc32c_tables():
    t0 = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t0[i] = c
    tables = [t0]
    for _ in range(3):
        prev = tables[-1]
        tables.append((prev >> np.uint32(8)) ^ t0[prev & 0xFF])
    return tables


_CRC_TABLES = _crc32c_tables()


def _masked_crc32c_batch(batch):
    """Masked CRC32C of every record of a `Batch`, four bytes per step for all rows together."""
    n = len(batch)
    lengths = np.diff(batch.offsets)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    order = np.argsort(-lengths, kind="stable")  # active rows are a prefix at every step
    sorted_len = lengths[order]
    width = (int(sorted_len[0]) + 3) // 4 * 4
    data = np.zeros((n, width), dtype=np.uint8)
    data[np.arange(width)[None, :] < lengths[:, None]] = batch.buffer
    data = data[order]
    words = np.ascontiguousarray(data.view("<u4").T)  # [width / 4, n]
    t0, t1, t2, t3 = _CRC_TABLES
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    full_words = sorted_len // 4
    active = n
    m8, m16, m24 = np.uint32(8), np.uint32(16), np.uint32(24)
    for j in range(width // 4):
        while active and full_words[active - 1] <= j:
            active -= 1
        if not active:
            break
        c = crc[:active] ^ words[j, :active]
        crc[:active] = (t3[c & 0xFF] ^ t2[(c >> m8) & 0xFF] ^ t1[(c >> m16) & 0xFF]
                        ^ t0[c >> m24])
    for t in range(3):  # the last 1-3 bytes
        rows = np.nonzero(sorted_len % 4 > t)[0]
        if len(rows):
            byte = data[rows, full_words[rows] * 4 + t]
            c = crc[rows]
            crc[rows] = t0[(c ^ byte) & 0xFF] ^ (c >> m8)
    crc ^= np.uint32(0xFFFFFFFF)
    result = np.empty_like(crc)
    result[order] = crc
    rotated = (result >> np.uint32(15)) | (result << np.uint32(17))
    return (rotated + np.uint32(0xA282EAD8)).astype(np.uint32)


def masked_crc32c(records):
    """Masked CRC32C (the TFRecord checksum) of each bytes object."""
    return _masked_crc32c_batch(Batch.from_list(list(records)))


def is_tfrecord_file(path, open_binary=None):
    """Whether a file is empty or starts with a TFRecord frame (its length's checksum holds):
    what the builder may replace with --overwrite. `open_binary(path)` reads a URL (default:
    a local file)."""
    with (open_binary or (lambda p: open(p, "rb")))(path) as f:
        head = f.read(12)
    if not head:
        return True
    return len(head) == 12 and int(masked_crc32c([head[:8]])[0]) == int.from_bytes(
        head[8:12], "little")


def frame_batch(batch):
    """TFRecord file bytes (uint8 array) for a `Batch` of serialized records."""
    n = len(batch)
    lengths = np.diff(batch.offsets)
    width = int(lengths.max(initial=0))
    frame = np.zeros((n, 12 + width + 4), dtype=np.uint8)
    frame[:, :8] = lengths.astype("<u8").view(np.uint8).reshape(n, 8)
    len_batch = Batch(frame[:, :8].ravel().copy(), np.arange(n + 1, dtype=np.int64) * 8)
    frame[:, 8:12] = _masked_crc32c_batch(len_batch).astype("<u4").view(np.uint8).reshape(n, 4)
    cols = np.arange(width)[None, :]
    data_valid = cols < lengths[:, None]
    frame[:, 12:12 + width][data_valid] = batch.buffer
    frame[:, 12 + width:] = _masked_crc32c_batch(batch).astype("<u4").view(np.uint8).reshape(n, 4)
    valid = np.ones(frame.shape, dtype=bool)
    valid[:, 12:12 + width] = data_valid
    return frame[valid]


def frame_records(records):
    """TFRecord file bytes for a list of serialized records."""
    return frame_batch(Batch.from_list(list(records))).tobytes() if records else b""


class AtomicTFRecordWriter:
    """Writes TFRecords to `path + '.incomplete'` and renames it to `path` on success."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.tmp_path = self.path + ".incomplete"
        make_parent_dir(self.path)
        self._file = open(self.tmp_path, "wb")
        self.count = 0
        self.bytes = 0

    def write_batch(self, records):
        """Writes a `Batch` or a list of serialized records."""
        if not isinstance(records, Batch):
            records = Batch.from_list(list(records))
        if len(records):
            data = frame_batch(records)
            with self._naming_the_file():
                self._file.write(data.data)
            self.count += len(records)
            self.bytes += data.nbytes

    def close(self):
        with self._naming_the_file():
            self._file.close()
        os.replace(self.tmp_path, self.path)

    @contextlib.contextmanager
    def _naming_the_file(self):
        """A failed write (a full disk) names the output file it was for."""
        try:
            yield
        except OSError as e:
            if e.filename:
                raise
            raise OSError(e.errno, e.strerror, self.path) from None

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


def find_corrupt_record(paths):
    """(path, records read before the damage, TensorFlow's message) of the first file in
    `paths` that does not read to its end, else None. Reads every file: for error reports."""
    import tensorflow as tf
    for path in paths:
        good = 0
        try:
            for _ in tf.data.TFRecordDataset(path):
                good += 1
        except tf.errors.DataLossError as e:
            return path, good, short_tf_message(e.message)
    return None


def short_tf_message(message):
    """A TensorFlow op error's own words, without the function node and op name around them."""
    return message.split("}}")[-1].split("[Op:")[0].strip()
