"""The tick's expansion step: adopt a topic's multiplied partition count, or say why not.

The pipeline reports the broker's counts while they differ from the layout (`Topology`, Redis key
`topology`). A multiplied count is adopted at the next tick, its new partitions coupled to their
parents (`coupling`) until the broker has had it for `adopt_after_s`: a producer keeps writing a
moved key to the old partition until it refreshes its metadata (every 5 minutes by default in
the Java client and librdkafka), so until then a new partition is read only behind its parent.
(Until session 87 the adoption itself waited `adopt_after_s`, behind a barrier, and the moved
keys' records with it.) `autosizer layout expand --apply` asks for an adoption now behind a
barrier at the parents' ends, the operator vouching that the producers have moved. A count that
is not a multiple, or a shrink, is refused: logged once, and named in every decision until fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.elasticity.topology import Expansion, expansion, problems, requested

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class ExpansionCheck:
    adopt: Expansion | None = None  # adopt this now
    asked: bool = False  # an operator asked for it (`layout expand --apply`)
    notes: tuple[str, ...] = ()  # refusals and waits, for the decision record


@dataclass
class ExpansionWatch:
    store: MetadataStore
    adopt_after_s: float = 300.0
    _logged: tuple[str, ...] = field(default=(), repr=False)

    def check(self, layout: Layout, now_ms: int) -> ExpansionCheck:
        topology = self.store.topology()
        asked = self.store.expansion_request()
        if asked is not None:
            counts, generation = asked
            try:
                if generation != layout.generation:
                    raise ValueError(f"it was asked under layout generation {generation}, and the "
                                     f"layout is now {layout.generation}: run `autosizer layout expand` again")
                return ExpansionCheck(requested(layout, topology, counts, now_ms), asked=True)
            except ValueError as exc:
                self.store.clear_expansion_request()
                log.error("expansion.request_refused", job=self.store.job, error=str(exc))
                return ExpansionCheck(notes=(f"`layout expand` refused: {exc}",))
        if topology is None:
            self._log(())
            return ExpansionCheck()
        found = problems(layout, topology)
        self._log(tuple(found))
        grown = expansion(layout, topology, now_ms)
        if grown is None:
            return ExpansionCheck(notes=tuple(found))
        return ExpansionCheck(grown.coupled(self.adopt_after_s), notes=tuple(found))

    def adopted(self, check: ExpansionCheck) -> None:
        """The actuation ran (whatever its result): an operator's request is used up."""
        if check.asked:
            self.store.clear_expansion_request()

    def _log(self, found: tuple[str, ...]) -> None:
        if found != self._logged:
            for problem in found:
                log.error("expansion.refused", job=self.store.job, error=problem)
            self._logged = found
