"""Who may act on a session: the one meaning of `owner_id` in every service and selector.

- a user's id: that user, who may act on their own sessions only;
- `None`: the system, on its own ownerless sessions (a sub-agent's per-agent session of no
  user, say) — never "anyone's";
- `OPERATOR`: an operator's `manage.py` command, which may act on any session.

`selectors.session_get` is the one public check built on `may_act_on`: a session that is
missing and one the caller may not act on look the same (SessionNotFound), so ids cannot be
probed.
"""

from __future__ import annotations

import enum


class Operator(enum.Enum):
    """The `owner_id` of an operator's manage.py command, which acts on any user's session."""

    OPERATOR = "operator"


OPERATOR = Operator.OPERATOR

OwnerId = int | None | Operator


def may_act_on(session_owner_id: int | None, owner_id: OwnerId) -> bool:
    return owner_id is OPERATOR or session_owner_id == owner_id


def owner_filter(owner_id: OwnerId) -> int | None:
    """The store's `list(owner_id=…)` argument: None there lists every owner's sessions,
    which only the operator may ask for. The system's own ownerless sessions are not listed
    by owner."""
    if owner_id is OPERATOR:
        return None
    if owner_id is None:
        raise ValueError("the ownerless sessions are not listed by owner")
    return owner_id
