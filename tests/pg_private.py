"""A private PostgreSQL server for tests that must stop, restart or reconfigure one: `initdb` + `pg_ctl` under
`runuser -u postgres`, on a free port, data and socket in a fresh folder, so the machine's own server (5432) is
never touched. Trust authentication on 127.0.0.1."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def _bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise FileNotFoundError(f"{name} not found (PATH, /usr/lib/postgresql/*/bin)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="specsweep-pg-", dir="/tmp"))
        self.data = self.root / "data"
        self.port = free_port()
        shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o700)
        self._as_postgres(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.log = self.root / "server.log"

    def _as_postgres(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=120,
                              check=check)

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres(_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def url(self, user: str = "postgres", database: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, user: str = "postgres", database: str = "postgres") -> str:
        res = subprocess.run([_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", user, "-d", database,
                              "-v", "ON_ERROR_STOP=1", "-Atc", sql], capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError(res.stderr.strip())
        return res.stdout.strip()

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
