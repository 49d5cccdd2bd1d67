"""Text files read as every reader here reads them: UTF-8, a byte-order mark dropped, UTF-16
text and bytes that are not UTF-8 refused in one line naming the file, line and byte."""

import codecs


def read_text(path, error=ValueError):
    """The text of UTF-8 file `path` (local, or any filesystem TensorFlow reads) without a
    byte-order mark, its line ends as they are; a file that is not UTF-8 raises `error`."""
    path = str(path)
    if "://" in path:
        import tensorflow as tf  # only here: the host readers load without TensorFlow
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    else:
        with open(path, "rb") as f:
            data = f.read()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise error(f"{path} is UTF-16 text; save it as UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{path}:{line}: byte {e.start} (0x{data[e.start]:02x}, column {column}) "
                    f"is not UTF-8; save the file as UTF-8") from None
