"""Disjoint-set forest with path compression and union by size."""

from collections.abc import Hashable, Iterable


class UnionFind:
    """Track a partition of elements into disjoint sets.

    ``union`` attaches the root of the smaller set under the root of the larger one;
    on a tie the root of the first argument stays the root. ``find`` compresses the
    path so that every visited element points straight at its root afterwards.
    """

    def __init__(self, elements: Iterable[Hashable] = ()) -> None:
        self._parent: dict = {}
        self._size: dict = {}
        self._sets = 0
        for element in elements:
            self.add(element)

    def add(self, element: Hashable) -> bool:
        """Add ``element`` as a singleton set; return False if it was already present."""
        if element in self._parent:
            return False
        self._parent[element] = element
        self._size[element] = 1
        self._sets += 1
        return True

    def __len__(self) -> int:
        """Number of elements (not sets)."""
        return len(self._parent)

    def __contains__(self, element: object) -> bool:
        return element in self._parent

    @property
    def set_count(self) -> int:
        """Number of disjoint sets."""
        return self._sets

    def parent_of(self, element: Hashable) -> Hashable:
        """Return the stored parent link of ``element`` (itself for a root)."""
        if element not in self._parent:
            raise KeyError(f"unknown element {element!r}")
        return self._parent[element]

    def find(self, element: Hashable) -> Hashable:
        """Return the root of ``element``'s set, compressing the path on the way."""
        if element not in self._parent:
            raise KeyError(f"unknown element {element!r}")
        limit = len(self._parent)
        root = element
        for _ in range(limit):
            parent = self._parent[root]
            if parent == root:
                break
            root = parent
        node = element
        for _ in range(limit):
            if node == root:
                break
            following = self._parent[node]
            self._parent[node] = root
            node = following
        return root

    def union(self, a: Hashable, b: Hashable) -> bool:
        """Merge the sets of ``a`` and ``b``; return False if they were already together."""
        root_a = self.find(a)
        root_b = self.find(b)
        if root_a == root_b:
            return False
        if self._size[root_a] < self._size[root_b]:
            root_a, root_b = root_b, root_a
        self._parent[root_b] = root_a
        self._size[root_a] += self._size[root_b]
        self._sets -= 1
        return True

    def connected(self, a: Hashable, b: Hashable) -> bool:
        """True if ``a`` and ``b`` are in the same set."""
        return self.find(a) == self.find(b)

    def size_of(self, element: Hashable) -> int:
        """Return the number of elements in ``element``'s set."""
        root = self.find(element)
        return self._size[root]

    def groups(self) -> list[list]:
        """Return all sets as sorted lists, ordered by their smallest element."""
        by_root: dict = {}
        for element in self._parent:
            root = self.find(element)
            by_root.setdefault(root, []).append(element)
        result = [sorted(members) for members in by_root.values()]
        result.sort(key=lambda members: members[0])
        return result
