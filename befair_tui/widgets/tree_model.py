"""What a line tree shows, without Textual: items (a label, their data, their children), expanded
or collapsed, laid out as lines. `LineTree` (widgets/line_tree.py) draws its lines from it and is
told of every change through `ItemOwner`."""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

from rich.text import Text

T = TypeVar("T")
_ids = itertools.count()  # never reused, also across trees cleared and refilled: line caches key on it


class ItemOwner(Protocol):
    def item_changed(self, item: TreeItem[Any]) -> None:
        """An item's label or state changed: its line is drawn again."""

    def structure_changed(self) -> None:
        """Items were added, removed, expanded or collapsed: the lines are laid out again."""


def first_line(label: str | Text) -> Text:
    """A label as a line shows it: its first line (markup in a `str` is read)."""
    text = Text.from_markup(label) if isinstance(label, str) else label
    return text.split()[0]


class TreeItem(Generic[T]):
    """One item of the tree. `line` is its line number while it is shown (kept, as Textual's Tree
    keeps it, when it is hidden or removed); `version` counts the changes that alter its line."""

    def __init__(self, owner: ItemOwner, parent: TreeItem[T] | None, label: Text,
                 data: T | None = None, *, expanded: bool = True, allow_expand: bool = True) -> None:
        self._owner = owner
        self.parent = parent
        self.id = next(_ids)
        self._label = label
        self.data = data
        self._expanded = expanded
        self._allow_expand = allow_expand
        self._children: list[TreeItem[T]] = []
        self.line = -1
        self.version = 0

    def __repr__(self) -> str:
        return f"TreeItem({self.id}, {self._label.plain!r}, {self.data!r})"

    @property
    def children(self) -> Sequence[TreeItem[T]]:
        return self._children

    @property
    def label(self) -> Text:
        return self._label

    def set_label(self, label: str | Text) -> None:
        self._label = first_line(label)
        self.version += 1
        self._owner.item_changed(self)

    @property
    def is_last(self) -> bool:
        """The last child of its parent (the root counts as last)."""
        parent = self.parent
        return parent is None or (bool(parent._children) and parent._children[-1] is self)

    @property
    def next_sibling(self) -> TreeItem[T] | None:
        siblings = self.parent._children if self.parent is not None else [self]
        index = siblings.index(self) + 1
        return siblings[index] if index < len(siblings) else None

    @property
    def previous_sibling(self) -> TreeItem[T] | None:
        siblings = self.parent._children if self.parent is not None else [self]
        index = siblings.index(self) - 1
        return siblings[index] if index >= 0 else None

    @property
    def is_expanded(self) -> bool:
        return self._expanded

    @property
    def allow_expand(self) -> bool:
        return self._allow_expand

    @allow_expand.setter
    def allow_expand(self, allow: bool) -> None:
        self._allow_expand = allow
        self.version += 1

    def expand(self) -> None:
        self._expanded = True
        self.version += 1
        self._owner.structure_changed()

    def collapse(self) -> None:
        self._expanded = False
        self.version += 1
        self._owner.structure_changed()

    def toggle(self) -> None:
        self.collapse() if self._expanded else self.expand()

    def path(self) -> list[TreeItem[T]]:
        """The item's ancestors below the root, then the item."""
        out: list[TreeItem[T]] = []
        item: TreeItem[T] | None = self
        while item is not None and item.parent is not None:
            out.append(item)
            item = item.parent
        out.reverse()
        return out

    def add(self, label: str | Text, data: T | None = None, *, before: TreeItem[T] | None = None,
            expand: bool = False, allow_expand: bool = True) -> TreeItem[T]:
        """A new child, last or just before `before` (one of the children)."""
        index = len(self._children) if before is None else self._children.index(before)
        item = TreeItem(self._owner, self, first_line(label), data, expanded=expand,
                        allow_expand=allow_expand)
        self._children.insert(index, item)
        self.version += 1
        self._owner.structure_changed()
        return item

    def remove(self) -> None:
        """Take the item and its subtree out of the tree."""
        parent = self.parent
        if parent is None:
            raise ValueError("the root cannot be removed")
        parent._children.remove(self)
        parent.version += 1
        self._owner.structure_changed()


def lay_out(root: TreeItem[T]) -> list[TreeItem[T]]:
    """The shown items in line order (the root's children and, under every expanded item, its
    children), each given its line number."""
    lines: list[TreeItem[T]] = []
    append = lines.append
    stack = root._children[::-1]
    while stack:
        item = stack.pop()
        item.line = len(lines)
        append(item)
        if item._expanded and item._children:
            stack.extend(item._children[::-1])
    return lines
