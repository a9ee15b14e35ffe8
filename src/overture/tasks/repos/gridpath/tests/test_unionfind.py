import pytest
from gridpath import UnionFind


def test_new_elements_are_singletons():
    uf = UnionFind("abc")
    assert len(uf) == 3
    assert uf.set_count == 3
    assert uf.find("b") == "b"
    assert uf.size_of("c") == 1


def test_add_returns_false_for_duplicate():
    uf = UnionFind()
    assert uf.add(1) is True
    assert uf.add(1) is False
    assert len(uf) == 1
    assert uf.set_count == 1


def test_contains_reports_known_elements():
    uf = UnionFind([1, 2])
    assert 1 in uf
    assert 3 not in uf


def test_union_merges_and_decrements_set_count():
    uf = UnionFind(range(4))
    assert uf.union(0, 1) is True
    assert uf.set_count == 3
    assert uf.connected(0, 1)
    assert not uf.connected(0, 2)


def test_union_of_already_joined_returns_false():
    uf = UnionFind(range(3))
    uf.union(0, 1)
    assert uf.union(1, 0) is False
    assert uf.set_count == 2


def test_union_tie_keeps_first_root():
    uf = UnionFind("xy")
    uf.union("x", "y")
    assert uf.find("y") == "x"
    assert uf.parent_of("y") == "x"


def test_union_by_size_attaches_smaller_under_larger():
    uf = UnionFind(range(5))
    uf.union(0, 1)
    uf.union(0, 2)
    uf.union(4, 0)
    assert uf.find(4) == 0
    assert uf.parent_of(4) == 0
    assert uf.size_of(4) == 4


def test_size_of_tracks_merged_sizes():
    uf = UnionFind(range(6))
    uf.union(0, 1)
    uf.union(2, 3)
    uf.union(3, 4)
    uf.union(1, 4)
    assert uf.size_of(0) == 5
    assert uf.size_of(5) == 1


def test_find_compresses_path_to_root():
    uf = UnionFind(range(4))
    uf.union(0, 1)
    uf.union(2, 3)
    uf.union(0, 2)
    # 3 -> 2 -> 0 before compression
    assert uf.parent_of(3) == 2
    assert uf.find(3) == 0
    assert uf.parent_of(3) == 0
    assert uf.parent_of(2) == 0


def test_find_compresses_every_node_on_a_long_path():
    uf = UnionFind(range(8))
    uf.union(0, 1)
    uf.union(2, 3)
    uf.union(0, 2)
    uf.union(4, 5)
    uf.union(6, 7)
    uf.union(4, 6)
    uf.union(0, 4)
    # 7 -> 6 -> 4 -> 0 before compression
    assert [uf.parent_of(n) for n in (7, 6, 4)] == [6, 4, 0]
    assert uf.find(7) == 0
    assert [uf.parent_of(n) for n in (7, 6, 4)] == [0, 0, 0]


def test_find_unknown_element_raises():
    with pytest.raises(KeyError, match="unknown element 'q'"):
        UnionFind("ab").find("q")


def test_parent_of_unknown_element_raises():
    with pytest.raises(KeyError, match="unknown element 9"):
        UnionFind([1]).parent_of(9)


def test_union_with_unknown_element_raises():
    uf = UnionFind([1])
    with pytest.raises(KeyError):
        uf.union(1, 2)
    assert uf.set_count == 1


def test_groups_sorted_by_smallest_member():
    uf = UnionFind([5, 3, 1, 4, 2])
    uf.union(5, 1)
    uf.union(4, 3)
    assert uf.groups() == [[1, 5], [2], [3, 4]]


def test_groups_of_empty_structure():
    assert UnionFind().groups() == []


def test_chain_of_unions_forms_one_group():
    uf = UnionFind(range(6))
    for i in range(5):
        uf.union(i, i + 1)
    assert uf.set_count == 1
    assert uf.groups() == [[0, 1, 2, 3, 4, 5]]
    assert all(uf.connected(0, i) for i in range(6))
