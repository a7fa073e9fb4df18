"""The store's sweeps and the environment fingerprints their engines ran in."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from sqlalchemy import insert, select, update

from ..errors import StoreConflict
from ..states import SweepStatus
from .db import Database, new_id
from .rows import EnvironmentRow, SweepRow
from .schema import sweep_environments, sweeps


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class SweepRepository:
    db: Database

    def get_sweep(self, name: str) -> SweepRow | None:
        with self.db.read(f"reading sweep {name!r}") as conn:
            row = conn.execute(select(sweeps).where(sweeps.c.name == name)).mappings().first()
            return SweepRow.from_mapping(row) if row else None

    def create_sweep(self, name: str, spec_hash: str, spec: dict[str, Any], spec_path: str) -> int:
        with self.db.write(f"creating sweep {name!r}") as conn:
            found = conn.execute(select(sweeps.c.id, sweeps.c.spec_hash).where(sweeps.c.name == name)).first()
            if found is not None and found.spec_hash == spec_hash:  # an unacknowledged commit of this very call
                return int(found.id)
            res = conn.execute(insert(sweeps).values(name=name, spec_hash=spec_hash, spec=spec, spec_path=spec_path,
                                                     status=SweepStatus.RUNNING, created_at=now()))
            return new_id(res)

    def set_sweep_status(self, sweep_id: int, status: SweepStatus) -> None:
        with self.db.write(f"setting the status of sweep id {sweep_id}") as conn:
            conn.execute(update(sweeps).where(sweeps.c.id == sweep_id).values(
                status=SweepStatus(status), finished_at=None if status == SweepStatus.RUNNING else now()))

    def list_sweeps(self) -> list[SweepRow]:
        with self.db.read("listing sweeps") as conn:
            return [SweepRow.from_mapping(r) for r in conn.execute(select(sweeps).order_by(sweeps.c.id)).mappings()]

    def environment(self, environment_id: int | None) -> EnvironmentRow | None:
        """A stored fingerprint (None for None or an unknown id)."""
        if environment_id is None:
            return None
        with self.db.read(f"reading environment {environment_id}") as conn:
            row = conn.execute(select(sweep_environments).where(
                sweep_environments.c.id == environment_id)).mappings().first()
        return EnvironmentRow.from_mapping(row) if row else None

    def environment_id(self, fingerprint: dict[str, Any]) -> int:
        """Id of the environment row for this fingerprint, inserted if new (safe when several controllers
        insert the same fingerprint at once: the loser of the insert reads the winner's row)."""
        h = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()
        cols = {c.name for c in sweep_environments.columns} - {"id", "fingerprint_hash", "details", "created_at"}
        find = select(sweep_environments.c.id).where(sweep_environments.c.fingerprint_hash == h)
        with self.db.read("looking up an environment") as conn:
            found = conn.execute(find).scalar()
        if found is not None:
            return int(found)
        try:
            with self.db.write("recording an environment") as conn:
                res = conn.execute(insert(sweep_environments).values(
                    fingerprint_hash=h, created_at=now(), details={k: v for k, v in fingerprint.items() if k not in cols},
                    **{k: fingerprint.get(k) for k in cols}))
                return new_id(res)
        except StoreConflict:
            with self.db.read("looking up an environment") as conn:
                return int(conn.execute(find).scalar_one())
