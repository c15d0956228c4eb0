"""The metric x call path x rank table (analysis/callpaths.py) as Caliper's json-split
document, the format `cali-query -O json-split` writes and Hatchet's
`GraphFrame.from_caliper` and Thicket's `Thicket.from_caliper` read (docs/interop.md,
"Caliper json-split").

What those readers need, from their source (llnl-hatchet 2026.2): the four sections
`data`, `columns`, `column_metadata` and `nodes`, every other top-level key being run
metadata; a hierarchy column `path` whose values index `nodes` (each with its label, its
column and, below a root, its parent); `mpi.rank` as a value column; the metric columns
with `is_value` true, `sum#time.duration` and `inclusive#sum#time.duration` being what
Hatchet names `time` and `time (inc)`. With its default node ordering Hatchet also reads a
column `Node order` and takes node i's order from the first column of data row i, then
merges the children of two trees (`gf_a - gf_b`) by walking both in that order comparing
their names: so the nodes are numbered depth first with siblings in name order, data
row i is node i of the first rank, and `Node order` is the node's number.
"""

import json
import time

import numpy as np

from perfweave import progress
from perfweave.interop import callpath_export

# (column, callpaths metric, inclusive, Caliper's unit), in the order of the columns
COLUMNS = (
    ("sum#time.duration", "time", False, "sec"),
    ("inclusive#sum#time.duration", "time", True, "sec"),
    ("sum#mpi.time", "mpi_time", False, "sec"),
    ("sum#mpi.calls", "visits", False, "count"),
    ("sum#mpi.send.size", "bytes_sent", False, "bytes"),
    ("sum#mpi.recv.size", "bytes_recv", False, "bytes"),
)
INTEGER = {"visits", "bytes_sent", "bytes_recv"}


def document(table, metadata):
    """The json-split document (a dict) of CallpathMetrics table, metadata (flat
    key -> scalar) as its run metadata."""
    order = callpath_export.depth_first(table)
    new = np.empty(len(order), np.int64)
    new[order] = np.arange(len(order))
    nodes = []
    for i in order:
        node = {"label": table.names[i], "column": "path"}
        if table.parent[i] >= 0:
            node["parent"] = int(new[table.parent[i]])
        nodes.append(node)
    values = []
    for _, metric, inclusive, _ in COLUMNS:
        v = table.inclusive(metric) if inclusive else table.metrics[metric].values
        v = v[order]
        values.append(np.rint(v).astype(np.int64) if metric in INTEGER else v)
    ranks = callpath_export.column_ranks(table)
    n = len(order)
    node_ids = list(range(n))
    data = []
    for j, rank in enumerate(ranks.tolist()):  # rank by rank: row i is node i of the first
        cols = [v[:, j].tolist() for v in values]
        data.extend([k, k, rank, *row] for k, row in zip(node_ids, zip(*cols)))
    doc = {
        "data": data,
        "columns": ["Node order", "path", "mpi.rank"] + [c[0] for c in COLUMNS],
        "column_metadata": [{"is_value": False}, {"is_value": False}, {"is_value": True}]
        + [{"is_value": True, "attribute.unit": c[3]} for c in COLUMNS],
        "nodes": nodes,
    }
    doc.update(metadata)
    return doc


def node_paths(gf):
    """{node: its names from the root} of a Hatchet GraphFrame read from such a
    document: the key of perfweave's call paths (CallpathMetrics.paths, compare --by
    callpath's '/'-joined keys). From the roots down, as Hatchet's Caliper reader links
    a node to its children but not to its parents (Node.path() is the node alone)."""
    out = {}

    def walk(node, above):
        out[node] = above + (node.frame["name"],)
        for c in node.children:
            walk(c, out[node])

    for r in gf.graph.roots:
        walk(r, ())
    return out


def export(exp, out=None, force=False):
    """Write experiment exp's call-path profile as Caliper json-split to out (default
    EXP/export/caliper.json). Returns a summary dict (path, nodes, ranks, rows,
    seconds, notes)."""
    with progress.task("Caliper: reading the profile", 3, "step") as bar:
        src = callpath_export.load(exp)
        bar.step(what="Caliper: building the document")
        meta = callpath_export.run_metadata(src.exp)
        meta["perfweave.export"] = "caliper json-split"
        doc = document(src.table, meta)
        bar.step(what="Caliper: writing")
        path = callpath_export.write(exp, out, "caliper.json", force, json.dumps(doc))
        bar.step()
    return {
        "path": path,
        "nodes": len(src.table.names),
        "ranks": len(src.table.ranks),
        "rows": len(doc["data"]),
        "seconds": time.perf_counter() - src.started,
        "notes": src.notes,
    }
