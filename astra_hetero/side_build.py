"""One part of a run directory built in a forked process while this one builds another.

On a large cluster the network part (the cluster graph, ns-3 and analytical files) takes about as
long as the workload part, and neither reads the other: `SideBuild` forks before the workload is
built, the child writes the network part into a hidden folder of the staging directory, and once the
workload is written the parent moves that folder's entries into place. Anything going wrong in the
child (an error in the spec, a kill, no `fork` on this platform) is answered by building the part
again in this process, which raises exactly the error a sequential build would.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

# Below this many GPUs a part takes a second or less: forking would cost more than it saves.
SIDE_BUILD_MIN_GPUS = 16_384
SIDE_DIR = ".side-build"


class SideBuild:
    """`writer(path)` run in a forked child into `root/.side-build`, collected by `finish(root)`."""

    def __init__(self, writer: Callable[[Path], None], root: Path) -> None:
        self.writer = writer
        self.folder = Path(root) / SIDE_DIR
        self.folder.mkdir()
        self.process = multiprocessing.get_context("fork").Process(target=self._child, daemon=True)
        self.process.start()

    def _child(self) -> None:
        try:
            self.writer(self.folder)
        except BaseException:  # noqa: BLE001 - the parent builds the part again and reports it
            os._exit(1)

    def finish(self, root: Path) -> None:
        """The part's entries moved into `root`, or built here if the child did not succeed."""
        self.process.join()
        ok = self.process.exitcode == 0
        if ok:
            for entry in sorted(os.listdir(self.folder)):
                os.replace(self.folder / entry, Path(root) / entry)
        else:
            logger.info(
                "the side build failed (exit code %s); building in this process", self.process.exitcode
            )
        shutil.rmtree(self.folder, ignore_errors=True)
        if not ok:
            self.writer(Path(root))

    def abandon(self) -> None:
        """Stop the child (this process failed first) and remove its folder."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        shutil.rmtree(self.folder, ignore_errors=True)


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()
