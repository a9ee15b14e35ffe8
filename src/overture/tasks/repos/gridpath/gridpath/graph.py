"""Graph algorithms on adjacency dicts.

Weighted graphs map each node to ``{neighbour: weight}``; unweighted graphs map each
node to an iterable of neighbours. Nodes that only appear as neighbours are allowed.
Node labels must be mutually comparable (e.g. all str or all int) so that results can
be ordered deterministically.
"""

import heapq
from collections import deque
from collections.abc import Hashable, Iterable, Mapping

Node = Hashable
WeightedGraph = Mapping[Node, Mapping[Node, float]]
Graph = Mapping[Node, Iterable[Node]]


class CycleError(ValueError):
    """Raised by :func:`topological_sort` when the graph has a cycle."""

    def __init__(self, nodes: list) -> None:
        self.nodes = nodes
        super().__init__(f"graph has a cycle involving nodes {nodes}")


def all_nodes(graph: Graph) -> list:
    """Return every node of ``graph`` (keys and neighbours), sorted."""
    nodes = set(graph)
    for neighbours in graph.values():
        nodes.update(neighbours)
    return sorted(nodes)


def dijkstra(graph: WeightedGraph, source: Node) -> tuple[dict, dict]:
    """Return ``(dist, prev)`` for single-source shortest paths from ``source``.

    ``dist[n]`` is the cheapest total weight to reach ``n``; ``prev[n]`` is the node
    before ``n`` on that path (``prev[source]`` is None). Unreachable nodes are absent.
    Raises KeyError for an unknown source and ValueError for a negative weight.
    """
    if source not in graph:
        raise KeyError(f"source {source!r} is not in the graph")
    edge_count = 0
    for node, edges in graph.items():
        for neighbour, weight in edges.items():
            if weight < 0:
                raise ValueError(f"negative weight {weight} on edge {node!r} -> {neighbour!r}")
            edge_count += 1
    dist = {source: 0}
    prev = {source: None}
    heap = [(0, source)]
    budget = edge_count + 1
    while heap and budget > 0:
        cost, node = heapq.heappop(heap)
        if cost > dist[node]:
            continue
        budget -= 1
        for neighbour, weight in sorted(graph.get(node, {}).items()):
            candidate = cost + weight
            if neighbour not in dist or candidate < dist[neighbour]:
                dist[neighbour] = candidate
                prev[neighbour] = node
                heapq.heappush(heap, (candidate, neighbour))
    return dist, prev


def shortest_path(graph: WeightedGraph, source: Node, target: Node) -> tuple[float, list] | None:
    """Return ``(cost, path)`` of a cheapest path from ``source`` to ``target``, or None."""
    dist, prev = dijkstra(graph, source)
    if target not in dist:
        return None
    path = [target]
    node = prev[target]
    while node is not None and len(path) <= len(prev):
        path.append(node)
        node = prev[node]
    path.reverse()
    return dist[target], path


def topological_sort(graph: Graph) -> list:
    """Return the nodes so that every edge ``u -> v`` has ``u`` before ``v``.

    Among nodes that are ready at the same time the smallest comes first, so the order
    is unique. Raises :class:`CycleError` listing (sorted) the nodes left on or behind
    a cycle.
    """
    nodes = all_nodes(graph)
    indegree = dict.fromkeys(nodes, 0)
    for neighbours in graph.values():
        for neighbour in neighbours:
            indegree[neighbour] += 1
    # ``nodes`` is sorted, so ``ready`` starts out as a valid heap.
    ready = [node for node in nodes if indegree[node] == 0]
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for neighbour in graph.get(node, ()):
            indegree[neighbour] -= 1
            if indegree[neighbour] == 0:
                heapq.heappush(ready, neighbour)
    if len(order) < len(nodes):
        placed = set(order)
        raise CycleError([node for node in nodes if node not in placed])
    return order


def connected_components(graph: Graph) -> list[list]:
    """Return the components of ``graph`` treating every edge as undirected.

    Each component is a sorted list; components are ordered by their smallest node.
    """
    undirected: dict = {node: set() for node in all_nodes(graph)}
    for node, neighbours in graph.items():
        for neighbour in neighbours:
            undirected[node].add(neighbour)
            undirected[neighbour].add(node)
    seen: set = set()
    components = []
    for node in sorted(undirected):
        if node in seen:
            continue
        seen.add(node)
        component = [node]
        stack = [node]
        budget = len(undirected)
        while stack and budget > 0:
            budget -= 1
            current = stack.pop()
            for neighbour in undirected[current]:
                if neighbour not in seen:
                    seen.add(neighbour)
                    component.append(neighbour)
                    stack.append(neighbour)
        components.append(sorted(component))
    return components


def bfs_layers(graph: Graph, start: Node) -> list[list]:
    """Return the nodes reachable from ``start`` grouped by BFS distance.

    ``layers[k]`` holds the sorted nodes at exactly ``k`` edges from ``start``.
    """
    if start not in graph:
        raise KeyError(f"start {start!r} is not in the graph")
    depth = {start: 0}
    queue = deque([start])
    budget = len(all_nodes(graph))
    while queue and budget > 0:
        budget -= 1
        node = queue.popleft()
        for neighbour in sorted(graph.get(node, ())):
            if neighbour not in depth:
                depth[neighbour] = depth[node] + 1
                queue.append(neighbour)
    layers: list[list] = [[] for _ in range(max(depth.values()) + 1)]
    for node, level in depth.items():
        layers[level].append(node)
    for layer in layers:
        layer.sort()
    return layers
