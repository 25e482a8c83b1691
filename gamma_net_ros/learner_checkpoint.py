"""A node's learner on disk: declared where, resumed at start, saved on a timer and at shutdown.

    self.keeper = None  # first: a node refused before it is built has nothing to save
    keeper = LearnerCheckpoint(self)  # declares checkpoint_path, checkpoint_interval, resume
    keeper.resume(lambda path: learner.load(path))  # CheckpointError: refuse to start
    ...
    self.keeper = keeper.start(learner.save)  # from here on the learner is saved

``refused()`` (a node refused after it was built, see run_node) disarms it, so a refused node never
overwrites a checkpoint; ``save()`` keeps the previous file when the new one cannot be written.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable

from rclpy.node import Node

from gamma_net_core.checkpoint import check_writable
from gamma_net_ros.params import declare


class LearnerCheckpoint:
    def __init__(self, node: Node, *, interval: float = 30.0) -> None:
        self.node = node
        path = declare(node, "checkpoint_path", "", "learner checkpoint file ('' = none)", read_only=True)
        self.path = pathlib.Path(path).expanduser() if path else None
        if self.path is not None:
            check_writable(self.path)  # refused now, not at the first save minutes later
        self.interval = declare(node, "checkpoint_interval", interval, "s between checkpoints", low=0.1, high=86400.0)
        # Declared whether or not a checkpoint is set: a YAML giving it is not refused as unknown.
        self.wanted = declare(node, "resume", True, "resume from checkpoint_path if it exists", read_only=True)
        self.last: float | None = None
        self._save: Callable[[pathlib.Path], None] | None = None

    def resume(self, load: Callable[[pathlib.Path], int]) -> None:
        """Loads the checkpoint if there is one and resuming is wanted; ``load`` returns the update count.

        Raises:
          CheckpointError: the file holds another configuration (the node refuses to start).
        """
        if self.path is None or not self.wanted:
            return
        log = self.node.get_logger()
        if not self.path.exists():
            log.info(f"no checkpoint at {self.path}: starting a new learner")
            return
        log.info(f"resumed from {self.path} after {load(self.path)} updates")

    def start(self, save: Callable[[pathlib.Path], None]) -> LearnerCheckpoint:
        """Arms it: ``save(path)`` runs every ``checkpoint_interval`` s and at shutdown."""
        self._save = save
        if self.path is not None:
            self.node.create_timer(self.interval, self.save)
        return self

    def save(self) -> None:
        if self.path is None or self._save is None:
            return
        try:
            self._save(self.path)
        except OSError as exc:
            self.node.get_logger().error(f"checkpoint not written ({exc}); the previous one is intact")
            return
        self.last = time.time()

    def refused(self) -> None:
        """Nothing learned by a node refused after it was built is worth a checkpoint."""
        self._save = None

    @property
    def last_text(self) -> str:
        return "never" if self.last is None else time.ctime(self.last)

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else "off"
