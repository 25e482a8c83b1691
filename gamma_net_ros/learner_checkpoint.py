"""A node's learner on disk: declared where, resumed at start, saved on a timer and at shutdown.

    class Predictor(CheckpointHooks, Node):  # save_checkpoint, refused, destroy_node
        def __init__(self, ...):
            ...
            keeper = LearnerCheckpoint(self)  # declares checkpoint_path, checkpoint_interval, resume
            keeper.resume(lambda path: learner.load(path))  # CheckpointError: refuse to start
            ...
            self.keeper = keeper.start(learner.save)  # from here on the learner is saved

Until ``self.keeper`` is set, a node (refused before it is built) has nothing to save.
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
    """Where a node's learner is kept (see the module docstring).

    Args:
      node: the node whose parameters say where and how often.
      interval: the default ``checkpoint_interval``.
      interval_read_only: ``checkpoint_interval`` cannot be set at run time.
    """

    def __init__(self, node: Node, *, interval: float = 30.0, interval_read_only: bool = False) -> None:
        self.node = node
        path = declare(node, "checkpoint_path", "", "learner checkpoint file ('' = none)", read_only=True)
        self.path = pathlib.Path(path).expanduser() if path else None
        if self.path is not None:
            check_writable(self.path)  # refused now, not at the first save minutes later
        self.interval = declare(
            node,
            "checkpoint_interval",
            interval,
            "s between checkpoints",
            low=0.1,
            high=86400.0,
            read_only=interval_read_only,
        )
        # Declared whether or not a checkpoint is set: a YAML giving it is not refused as unknown.
        self.wanted = declare(node, "resume", True, "resume from checkpoint_path if it exists", read_only=True)
        self.last: float | None = None
        #: Why the last save at shutdown failed (learned state lost), else None.
        self.lost: str | None = None
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

    def start(
        self, save: Callable[[pathlib.Path], None], *, when_due: Callable[[], None] | None = None
    ) -> LearnerCheckpoint:
        """Arms it: ``save(path)`` runs every ``checkpoint_interval`` s and at shutdown.

        Args:
          save: writes the learner to the path.
          when_due: called by the timer instead of saving, for a node whose learner lives in another
            thread: that thread calls :meth:`save` then.
        """
        self._save = save
        if self.path is not None:
            self.node.create_timer(self.interval, when_due or self.save)
        return self

    def save(self, *, last: bool = False) -> None:
        """Write the checkpoint now; a failure keeps the previous file and is logged in one line.

        Args:
          last: the save at shutdown: a failure then also loses what was learned since the last
            save, which :attr:`lost` records for the exit code (see run_node).
        """
        if self.path is None or self._save is None:
            return
        try:
            self._save(self.path)
        except OSError as exc:
            if last:
                self.lost = (
                    f"the last checkpoint was not written to {self.path} ({exc.strerror or exc}): what was learned "
                    f"since {'the start' if self.last is None else self.last_text} is lost"
                )
                self.node.get_logger().error(self.lost)
            else:
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


class CheckpointHooks:
    """A learning node's checkpoint hooks, for the :class:`LearnerCheckpoint` in ``self.keeper``.

    Mixed in before ``Node`` (``class Horde(CheckpointHooks, Node)``): :func:`gamma_net_ros.node_main.run_node`
    calls ``refused()`` on a node refused after it was built, and ``destroy_node()`` at shutdown.
    """

    #: None until the node is built: a node refused half-way has nothing worth a checkpoint.
    keeper: LearnerCheckpoint | None = None

    def save_checkpoint(self, *, last: bool = False) -> None:
        if self.keeper is not None:
            self.keeper.save(last=last)

    def lost_on_exit(self) -> str | None:
        """Why what the node learned is lost (its last checkpoint failed), else None: run_node exits non-zero."""
        return self.keeper.lost if self.keeper is not None else None

    def refused(self) -> None:
        """Refused after it was built (see run_node): nothing learned here is worth a checkpoint."""
        if self.keeper is not None:
            self.keeper.refused()

    def destroy_node(self) -> None:
        self.save_checkpoint(last=True)  # the last learning before a shutdown is kept
        super().destroy_node()
