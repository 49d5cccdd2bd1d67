"""A local HTTP server for the download tests: files by path (release archives, TF-Hub's
compressed modules), the Hugging Face Hub's file-resolution route, and the faults a download
meets (a connection cut short, a checksum that does not match)."""

import base64
import hashlib
import http.server
import os
import re
import tarfile
import threading
import urllib.parse
import zipfile

_HF_ROUTE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


class ModelServer:
    def __init__(self):
        self.files = {}     # URL path → bytes
        self.headers = {}   # URL path → extra response headers
        self.cut_short = set()  # URL paths whose body stops halfway
        self.repos = {}     # "org/name" → (commit, {filename: bytes})
        self.requests = []  # the URL paths asked for, in order
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                server._answer(self, body=False)

            def do_GET(self):
                server._answer(self, body=True)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self):
        self._httpd.shutdown()
        self._httpd.server_close()

    def serve(self, path, data, md5=None):
        """`data` at `path`, with Google Cloud Storage's x-goog-hash (the MD5 of `md5`, default
        `data`) as the release bucket sends it."""
        self.files[path] = data
        digest = base64.b64encode(hashlib.md5(data if md5 is None else md5).digest()).decode()
        self.headers[path] = {"x-goog-hash": f"crc32c=AAAAAA==,md5={digest}"}

    def add_repo(self, repo, directory, commit="0123456789abcdef0123456789abcdef01234567"):
        files = {}
        for root, _, names in os.walk(directory):
            for name in names:
                full = os.path.join(root, name)
                with open(full, "rb") as f:
                    files[os.path.relpath(full, directory).replace(os.sep, "/")] = f.read()
        self.repos[repo] = (commit, files)
        return commit

    def _answer(self, handler, body):
        path = urllib.parse.urlsplit(handler.path).path
        self.requests.append(path)
        m = _HF_ROUTE.match(path)
        if m:
            return self._answer_hub(handler, body, path, *m.groups())
        if path not in self.files:
            return _send(handler, 404, {}, b"not found", body)
        data = self.files[path]
        headers = {"Content-Type": "application/octet-stream", **self.headers.get(path, {})}
        _send(handler, 200, headers, data, body, cut_short=path in self.cut_short)

    def _answer_hub(self, handler, body, path, repo, revision, filename):
        if repo not in self.repos:
            return _send(handler, 404, {"X-Error-Code": "RepoNotFound"}, b"", body)
        commit, files = self.repos[repo]
        if urllib.parse.unquote(revision) not in ("main", commit):
            return _send(handler, 404, {"X-Error-Code": "RevisionNotFound"}, b"", body)
        if filename not in files:
            return _send(handler, 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit},
                         b"", body)
        data = files[filename]
        _send(handler, 200, {"X-Repo-Commit": commit,
                             "ETag": f'"{hashlib.sha256(data).hexdigest()}"'}, data, body,
              cut_short=path in self.cut_short)


def _send(handler, status, headers, data, body, cut_short=False):
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if body:
        handler.wfile.write(data[: len(data) // 2] if cut_short else data)
    if cut_short:
        handler.close_connection = True


def tar_gz(directory, arcname):
    """The bytes of a .tar.gz holding `directory` as `arcname/`, as the original's releases pack."""
    path = f"{directory}.tar.gz"
    with tarfile.open(path, "w:gz") as t:
        t.add(directory, arcname=arcname)
    with open(path, "rb") as f:
        return f.read()


def zip_bytes(directory, arcname):
    """The bytes of a .zip holding `directory` as `arcname/`, as brightmart/albert_zh's pack."""
    path = f"{directory}.zip"
    with zipfile.ZipFile(path, "w") as z:
        for root, _, names in os.walk(directory):
            for name in names:
                full = os.path.join(root, name)
                z.write(full, os.path.join(arcname, os.path.relpath(full, directory)))
    with open(path, "rb") as f:
        return f.read()
