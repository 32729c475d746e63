"""Which queues a worker takes deliveries from: one queue (``"orders"``), several in strict
order (``["critical", "default"]``: the first whenever it has something due), or several by
weight (``{"critical": 6, "default": 3, "low": 1}``). Several are received in one long poll
(``POST /v1/receive``); each delivery names its queue, where it is settled."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .handling import Job
from .models import Delivery

__all__ = ["QueueSpec", "Source", "by_queue"]

# A queue's name, queue names in strict order, or queue names and their weights (1-1000).
QueueSpec = Union[str, Sequence[str], Mapping[str, int]]


@dataclass(frozen=True)
class Source:
    """The queues of a worker, read from a :data:`QueueSpec`."""

    queues: Tuple[str, ...]
    weights: Optional[Dict[str, int]] = None

    @classmethod
    def of(cls, spec: QueueSpec) -> "Source":
        if isinstance(spec, str):
            return cls((spec,))
        if isinstance(spec, Mapping):
            weights = dict(spec)
            for name, weight in weights.items():
                if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
                    raise ValueError(f"the weight of queue {name!r} is a whole number from 1 "
                                     f"to 1000, not {weight!r}")
            if not weights:
                raise ValueError("a worker needs at least one queue")
            return cls(tuple(weights), weights if len(weights) > 1 else None)
        names = tuple(spec)
        if not names or not all(isinstance(n, str) for n in names):
            raise ValueError("a worker's queues: a name, a list of names or a dict of weights")
        if len(set(names)) != len(names):
            raise ValueError(f"a queue is named twice in {list(names)}")
        return cls(names)

    @property
    def single(self) -> Optional[str]:
        """The one queue, when there is only one."""
        return self.queues[0] if len(self.queues) == 1 else None

    @property
    def strict(self) -> Optional[List[str]]:
        """The queues in strict order, when there are several and no weights."""
        return list(self.queues) if len(self.queues) > 1 and self.weights is None else None

    @property
    def name(self) -> str:
        """For logs and thread names."""
        if self.weights:
            return ",".join(f"{q}={w}" for q, w in self.weights.items())
        return ",".join(self.queues)


def by_queue(jobs: Iterable[Job]) -> Dict[str, List[Job]]:
    """``jobs`` by the queue each delivery came from (where it must be settled)."""
    grouped: Dict[str, List[Job]] = {}
    for job in jobs:
        grouped.setdefault(job.delivery.queue, []).append(job)
    return grouped


def receipts_by_queue(deliveries: Iterable[Delivery]) -> Dict[str, List[str]]:
    """The receipts of ``deliveries`` by the queue each came from (where it is settled)."""
    grouped: Dict[str, List[str]] = {}
    for d in deliveries:
        grouped.setdefault(d.queue, []).append(d.receipt)
    return grouped
