"""Comments: set where the text changes or the object is fresh, dropped unless their
object goes anyway."""

from __future__ import annotations

from runner.engines.changes import Change, Phase
from runner.engines.diff.state import DiffState

__all__ = ["CommentDiffer"]


class CommentDiffer(DiffState):
    def comments(self) -> None:
        live, desired = self.live.comments, self.desired.comments
        fresh = self.fresh()
        fresh |= {c.key for c in self.changes if c.op == "add_column"}
        for key in sorted(live.keys() | desired.keys()):
            old, new = live.get(key), desired.get(key)
            if new is not None and (old is None or old.text != new.text or new.on in fresh):
                self.add(Change("set_comment", key, Phase.FINISH, after=new))
            elif new is None and old is not None and not self._gone(old.on):
                self.add(Change("drop_comment", key, Phase.FINISH, before=old))
