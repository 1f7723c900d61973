"""One training per run folder at a time."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from miniformer.errors import UserError

LOCK_FILE = ".train.lock"


class run_lock:  # noqa: N801 - used as a context manager, like open()
    """A second process of the same run says who holds it and exits."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path, self.name = Path(folder) / LOCK_FILE, name

    def __enter__(self) -> run_lock:
        self.file = open(self.path, "a+")  # noqa: SIM115 - held until __exit__
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.seek(0)
            holder = self.file.read().strip() or "another process"
            self.file.close()
            raise UserError(f"run {self.name} is being trained by process {holder} (lock {str(self.path)!r}); wait "
                            "for it to finish or stop it, then re-run") from None
        except OSError as e:  # a file system without locks (some NFS mounts): train, but say what is not guarded
            print(f"note: cannot lock {self.path} ({e.strerror}); a second training of {self.name} started "
                  "meanwhile would not be refused", file=sys.stderr)
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()
        return self

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)  # a run folder holds only outputs once training is over
        self.file.close()  # closing releases the lock
