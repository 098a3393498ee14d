"""A session's family as a tree (docs/design.md §24): the root it was branched from, its
branches and theirs, each with where it branched (`branched_at_seq`).

Drawn from `parent_id` over the owner's sessions, read once (metadata only): a branch of
another person's session cannot exist, and a parent that was deleted leaves its branches as
roots of their own (SET_NULL). Linear in the owner's sessions; a pathological chain deeper
than TREE_DEPTH_MAX is cut there (`truncated`), so that no answer nests deeper than a JSON
encoder or a browser can take.
"""

from __future__ import annotations

from typing import Any

from sessions_app.selectors.sessions import session_get
from sessions_app.store import SessionMeta, get_store

TREE_DEPTH_MAX = 100


def _node(meta: SessionMeta) -> dict[str, Any]:
    return {
        "id": meta.id,
        "title": meta.title,
        "parent_id": meta.parent_id,
        "branched_at_seq": meta.branched_at_seq,
        "children": [],
    }


def session_tree(*, session_id: str, owner_id: int) -> dict[str, Any]:
    """The root of the caller's session's family, with its descendants nested, oldest first.
    SessionNotFound when the session is missing or not the caller's."""
    session_get(session_id=session_id, owner_id=owner_id)
    metas = {meta.id: meta for meta in get_store().list(owner_id=owner_id)}
    children: dict[str, list[SessionMeta]] = {}
    for meta in sorted(metas.values(), key=lambda meta: (meta.created_at, meta.id)):
        if meta.parent_id in metas:
            children.setdefault(meta.parent_id, []).append(meta)
    root = metas[session_id]
    seen = {root.id}
    while root.parent_id in metas and root.parent_id not in seen:
        root = metas[root.parent_id]
        seen.add(root.id)
    tree = _node(root)
    # Breadth first, without recursion: (node, its meta, its depth).
    level = [(tree, root, 0)]
    while level:
        following = []
        for node, meta, depth in level:
            below = children.get(meta.id, [])
            if depth >= TREE_DEPTH_MAX and below:
                node["truncated"] = True
                continue
            for child in below:
                child_node = _node(child)
                node["children"].append(child_node)
                following.append((child_node, child, depth + 1))
        level = following
    return tree
