"""A git smart-HTTP server on loopback: Git's own ``git http-backend`` (CGI) behind a small threaded HTTP server,
so a real source-controller clones a GitRepository from it (docs/architecture.md#real-flux).

Git documents the CGI contract in ``git-http-backend(1)``: ``GIT_PROJECT_ROOT`` is the folder of bare
repositories, ``GIT_HTTP_EXPORT_ALL`` serves each without a ``git-daemon-export-ok`` file, and the request is
described by the usual CGI variables (``PATH_INFO``, ``QUERY_STRING``, ``REQUEST_METHOD``, ``CONTENT_TYPE``,
``HTTP_CONTENT_ENCODING`` for gzip bodies). Read-only: pushes are refused (``http.receivepack`` is off by
default for anonymous users); repositories are written with :meth:`GitHttpServer.commit`, through a local clone.

Usage::

    with GitHttpServer() as git:
        git.commit("infra", {"apps/podinfo/cm.yaml": "..."})
        url = git.url("infra")  # http://127.0.0.1:<port>/infra.git
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

GIT_HTTP_BACKEND = Path("/usr/lib/git-core/git-http-backend")
"""Where Debian's ``git`` package installs the CGI program (``git --exec-path``)."""

BRANCH = "main"
"""The branch :meth:`GitHttpServer.commit` writes."""


class GitServerError(RuntimeError):
    """``git`` is missing or a ``git`` command failed (the message holds its output)."""


def _git_exec_path() -> Path:
    try:
        out = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as err:
        raise GitServerError(f"`git` is needed for the local git server: {err}") from None
    return Path(out) / "git-http-backend"


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request body: ``Content-Length`` bytes, or the chunks of a chunked body."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def cgi_response(output: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Split a CGI program's output into (status code, headers, body); ``Status:`` sets the code (200 without)."""
    head, sep, body = output.partition(b"\r\n\r\n")
    if not sep:
        head, _, body = output.partition(b"\n\n")
    status, headers = 200, []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers.append((name.strip(), value.strip()))
    return status, headers, body


def _handler(root: Path, backend: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _serve(self) -> None:
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
                "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1",
                "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
                "REMOTE_ADDR": self.client_address[0],
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            }
            for name in ("Content-Encoding", "Git-Protocol", "Accept"):
                if (value := self.headers.get(name)) is not None:
                    env[f"HTTP_{name.upper().replace('-', '_')}"] = value
            body = _read_body(self) if self.command == "POST" else b""
            env["CONTENT_LENGTH"] = str(len(body))
            proc = subprocess.run([str(backend)], input=body, env=env, capture_output=True, check=False)
            status, headers, payload = cgi_response(proc.stdout)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _serve
        do_POST = _serve

    return Handler


class GitHttpServer:
    """Bare repositories under a temp folder, served read-only on ``http://127.0.0.1:<port>/<name>.git``.

    Args:
        port: port to listen on (0: a free one).

    Raises (on start):
        GitServerError: ``git`` or ``git http-backend`` is not installed.
    """

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.root = Path()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, repo: str) -> str:
        """The clone URL of repository ``repo``."""
        return f"http://127.0.0.1:{self.port}/{repo}.git"

    def start(self) -> GitHttpServer:
        backend = GIT_HTTP_BACKEND if GIT_HTTP_BACKEND.exists() else _git_exec_path()
        if not backend.exists():
            raise GitServerError(f"{backend} not found: install git (it ships git-http-backend)")
        self.root = Path(tempfile.mkdtemp(prefix="tatara-git-"))
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self.root, backend))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="git-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self.root != Path():
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = Path()

    def __enter__(self) -> GitHttpServer:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _git(self, *args: str, cwd: Path) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "tatara", "GIT_AUTHOR_EMAIL": "tatara@localhost",
               "GIT_COMMITTER_NAME": "tatara", "GIT_COMMITTER_EMAIL": "tatara@localhost",
               "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.root)}
        proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise GitServerError(f"git {' '.join(args)} failed: {proc.stdout}{proc.stderr}")
        return proc.stdout.strip()

    def commit(self, repo: str, files: Mapping[str, str], message: str = "tatara: local example") -> str:
        """Make ``files`` (path → text) the whole tree of ``repo``'s ``main`` branch in one new commit (the
        bare repository is created on first use); return the commit's SHA-1."""
        bare = self.root / f"{repo}.git"
        if not bare.exists():
            self._git("init", "--bare", f"--initial-branch={BRANCH}", str(bare), cwd=self.root)
        with tempfile.TemporaryDirectory(dir=self.root) as work:
            tree = Path(work)
            self._git("init", f"--initial-branch={BRANCH}", ".", cwd=tree)
            for rel, text in files.items():
                target = tree / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            self._git("add", "--all", cwd=tree)
            self._git("commit", "--allow-empty", "-m", message, cwd=tree)
            self._git("push", "--force", str(bare), f"HEAD:refs/heads/{BRANCH}", cwd=tree)
            return self._git("rev-parse", "HEAD", cwd=tree)
