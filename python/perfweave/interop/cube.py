"""The metric x call path x rank table (analysis/callpaths.py), with the wait states of
`perfweave analyze` and the POP useful time, as a CUBE 4 `.cubex` file for the CUBE GUI
and CubeLib's and pycubexr's readers (docs/interop.md, "CUBE").

A `.cubex` is an uncompressed tar of `anchor.xml` (the metrics, the call tree as regions
and call nodes, the system tree of machine, nodes, processes and threads) and per metric
`ID.index` and `ID.data`. Their layout, from CubeW's writer and pycubexr's reader: the
index is `CUBEX.INDEX`, the number 1 as uint32 (the reader's endianness test), version 0
as uint16, the index format as uint8 (1: sparse), then the number of rows and each row's
position in the call tree's enumeration (uint32s); the data is `CUBEX.DATA` and the rows,
each one value per location in location order. A metric of type EXCLUSIVE numbers the
call nodes depth first in the order the XML lists them, and its values exclude the
callees': the call node ids here are that order, so a row's position is its node's id.
Only rows with a value are written.

The metrics are flat (none is a child of another): CUBE shows a parent metric's value
as its own plus its children's, and the table's metrics overlap (the sampled time of an
MPI call holds its MPI time, the MPI time its wait states) without being parts of one
another, so no tree would add up.
"""

import io
import tarfile
import time
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from perfweave import progress
from perfweave.interop import callpath_export
from perfweave.model.waitstates import split_site
from perfweave.symbols import Symbolizer

INDEX_MARKER = b"CUBEX.INDEX"
DATA_MARKER = b"CUBEX.DATA"
SPARSE = 1  # CubeW's IndexFormat: NONE, SPARSE, BITVECTOR, DENSE

# callpaths metric -> (CUBE unique name, display name, data type, unit, description)
TABLE_METRICS = {
    "time": (
        "time",
        "Time (sampled)",
        "DOUBLE",
        "sec",
        "Wall time sampled in the call path itself",
    ),
    "mpi_time": ("mpi", "MPI time", "DOUBLE", "sec", "Time in the MPI call, measured"),
    "visits": ("visits", "Visits", "UINT64", "occ", "MPI calls"),
    "bytes_sent": ("bytes_sent", "Bytes sent", "UINT64", "bytes", "Bytes the MPI calls sent"),
    "bytes_recv": (
        "bytes_received",
        "Bytes received",
        "UINT64",
        "bytes",
        "Bytes the MPI calls received",
    ),
}
UNITS = {"s": ("DOUBLE", "sec"), "count": ("UINT64", "occ"), "bytes": ("UINT64", "bytes")}
POP_USEFUL = "pop_useful"


class CubeMetric:
    """A metric of the file: its definition, and its values on the table's nodes and
    columns: dense (values), as (node, column, value) arrays (entries: a wait state is
    on few of them), and on the call tree's root (root, per column); each or None."""

    def __init__(self, uniq, disp, dtype, uom, descr, values=None, root=None, entries=None):
        self.uniq, self.disp, self.dtype, self.uom, self.descr = uniq, disp, dtype, uom, descr
        self.values, self.root, self.entries = values, root, entries


def _trace_functions(ws, symbolizer):
    """{call path id: its function names from the root's child to the leaf} of the
    wait-state result ws: a user function (F: its address, N: its name), then for an MPI
    call site (M) the function that called it and the MPI function."""
    sym = symbolizer or Symbolizer()
    out = {}
    for cid, labels in zip(ws.callpaths["id"].tolist(), ws.callpaths["labels"]):
        names = []
        for lab in labels[1:]:  # the root: the program
            kind, _, rest = lab.partition(":")
            if kind == "N":
                names.append(rest)
                continue
            fn, site = ("", rest) if kind == "F" else rest.partition("@")[::2]
            s = split_site(site)
            if s and s[0] not in ("?", ""):
                # a function's address is itself; a call site's the return address
                loc = sym.resolve(s[0], [s[1] + (1 if kind == "F" else 0)])[0]
                if loc is not None and loc.function:
                    names.append(loc.function)
            if fn:
                names.append(fn)
        out[int(cid)] = tuple(names)
    return out


def _placement(fns_of, table):
    """The call paths of the trace (sorted ids) and the table node of each (call path,
    column), -1 for the call tree's root; and the ids of those put there for want of a
    node (not the trace's root itself)."""
    paths = table.paths()
    ending = {}  # every ending of every path -> its nodes
    for i, p in enumerate(paths):
        for n in range(1, len(p) + 1):
            ending.setdefault(p[-n:], []).append(i)
    mpi, sampled = table.metrics["mpi_time"].values, table.metrics["time"].values
    cids = np.array(sorted(fns_of), np.int64)
    place = np.full((len(cids), len(table.ranks)), -1, np.int64)
    unplaced = []
    for k, cid in enumerate(cids.tolist()):
        fns = fns_of[cid]
        found = next((ending[fns[-n:]] for n in range(len(fns), 0, -1) if fns[-n:] in ending), [])
        if not found:
            if fns:
                unplaced.append(cid)
            continue
        c = np.array(found)
        m = mpi[c]  # by MPI time, equal ones by sampled time
        best = np.argmax(np.where(m == m.max(axis=0), sampled[c], -np.inf), axis=0)
        place[k] = c[best]
    return cids, place, np.array(unplaced, np.int64)


def wait_state_metrics(ws, table, notes, taken, symbolizer=None):
    """CubeMetrics of the wait-state analysis ws (a WaitStatesResult) on the table's
    nodes (numbered as in the table): a call path of the trace goes to the table's node
    whose path ends with its functions (_trace_functions; the longest such ending), for
    each rank the one of those where the rank's MPI time, then sampled time, is largest.
    The trace's root (the program: computation outside any known function), and a call
    path no node ends with, go to the call tree's root; the latter with a note."""
    cids, place, unplaced = _placement(_trace_functions(ws, symbolizer), table)
    ranks = table.ranks.astype(np.int64)
    col_of = np.full(
        max(int(ranks.max(initial=-1)), int(ws.values["rank"].max(initial=-1))) + 2, -1
    )
    col_of[ranks[ranks >= 0]] = np.flatnonzero(ranks >= 0)
    out = []
    moved = lost = 0.0
    for m in ws.metrics:
        vals = ws.values_of(m["id"])
        if not len(vals):
            continue
        k = np.searchsorted(cids, vals["callpath"].astype(np.int64))
        col = col_of[vals["rank"].astype(np.int64)]
        x = vals["value"].astype(np.float64)
        here = col >= 0
        lost += float(np.abs(x[~here]).sum())
        k, col, x = k[here], col[here], x[here]
        node = place[k, col]
        moved += float(np.abs(x[np.isin(cids[k], unplaced)]).sum())
        root = np.zeros(len(ranks))
        np.add.at(root, col[node < 0], x[node < 0])
        on = node >= 0
        uniq = m["id"] if m["id"] not in taken else f"trace_{m['id']}"
        disp = f"{m['name']} (trace)"
        dtype, uom = UNITS.get(m["unit"], ("DOUBLE", m["unit"]))
        out.append(
            CubeMetric(
                uniq,
                disp,
                dtype,
                uom,
                m["description"],
                root=root if root.any() else None,
                entries=(node[on], col[on], x[on]),
            )
        )
    if moved:
        notes.append(
            f"wait-state values ({moved:g} in their units) on call paths the profile does not "
            "have are on the call tree's root"
        )
    if lost:
        notes.append(
            f"wait-state values ({lost:g} in their units) of ranks the profile lacks are left out"
        )
    return out


def pop_useful_metric(e, table):
    """The POP useful time of each rank (perfweave pop from the profile: its time less
    its MPI time, in the MPI_Pcontrol region when marked) as a CubeMetric on the root
    call node, and the POP factors of the run for the file's attributes; (None, {})
    without a profile of MPI ranks."""
    from perfweave.analysis import pop
    from perfweave.errors import PerfweaveError
    from perfweave.readers.profile import read_profile

    try:
        profile = read_profile(e.path / "profile.pwprof")
    except (PerfweaveError, OSError):
        return None, {}
    result = pop.from_profile(profile, e.path)
    if not result.ranks:
        return None, {}
    col_of_rank = {int(r): j for j, r in enumerate(table.ranks.tolist()) if r >= 0}
    v = np.zeros(len(table.ranks))
    for (rank, _), u in zip(result.locations, result.useful_ns.tolist()):
        if rank in col_of_rank:
            v[col_of_rank[rank]] = u / 1e9
    attrs = {f"POP {k.replace('_', ' ')}": f"{x:.6g}" for k, x in result.mul.items()}
    attrs["POP runtime (s)"] = f"{result.region.runtime_ns / 1e9:.9g}"
    descr = (
        "POP useful time of the process (its time less its MPI time, in the MPI_Pcontrol "
        "region where marked), on the root call path"
    )
    return CubeMetric(POP_USEFUL, "POP useful time", "DOUBLE", "sec", descr, root=v), attrs


def _hosts(e, table):
    """The host name of each column."""
    prof = e.profile
    default = (e.meta or {}).get("host", "") or "localhost"
    by_rank = {}
    for r in prof.ranks:
        h = int(r["host"])
        by_rank[int(r["rank"])] = prof.hosts[h] if 0 <= h < len(prof.hosts) else default
    return [by_rank.get(int(r), default) if r >= 0 else default for r in table.ranks.tolist()]


def anchor(metrics, names, parent, regions, hosts, ranks, attrs, title):
    """anchor.xml: metrics (CubeMetric, id = position), the call tree (names and
    parents of call nodes numbered depth first, a parent before its children), regions
    (name -> id), the locations' hosts and process ranks (one thread each)."""
    x = ['<?xml version="1.0" encoding="UTF-8"?>', '<cube version="4.4">']
    for k, v in attrs.items():
        x.append(f"<attr key={quoteattr(str(k))} value={quoteattr(str(v))}/>")
    x.append("<doc><mirrors></mirrors></doc>")
    x.append("<metrics>")
    for i, m in enumerate(metrics):
        x.append(
            f'<metric id="{i}" type="EXCLUSIVE"><disp_name>{escape(m.disp)}</disp_name>'
            f"<uniq_name>{escape(m.uniq)}</uniq_name><dtype>{m.dtype}</dtype>"
            f"<uom>{escape(m.uom)}</uom><url></url><descr>{escape(m.descr)}</descr></metric>"
        )
    x.append("</metrics>")
    x.append("<program>")
    for name, rid in regions.items():
        paradigm = "mpi" if name.startswith("MPI_") else "compiler"
        x.append(
            f'<region id="{rid}" mod="" begin="-1" end="-1"><name>{escape(name)}</name>'
            f"<mangled_name>{escape(name)}</mangled_name><paradigm>{paradigm}</paradigm>"
            "<role>function</role><url></url><descr></descr></region>"
        )
    children = [[] for _ in names]
    for i, p in enumerate(parent):
        if p >= 0:
            children[p].append(i)

    def cnode(i):
        x.append(f'<cnode id="{i}" calleeId="{regions[names[i]]}">')
        for c in children[i]:
            cnode(c)
        x.append("</cnode>")

    for i, p in enumerate(parent):
        if p < 0:
            cnode(i)
    x.append("</program>")
    x.append("<system>")
    x.append(f'<systemtreenode Id="0"><name>{escape(title)}</name><class>machine</class>')
    loc = 0
    for h, host in enumerate(dict.fromkeys(hosts)):
        x.append(f'<systemtreenode Id="{h + 1}"><name>{escape(host)}</name><class>node</class>')
        for j in [j for j, hj in enumerate(hosts) if hj == host]:
            r = int(ranks[j])
            x.append(
                f'<locationgroup Id="{loc}"><name>MPI Rank {r}</name><rank>{r}</rank>'
                f'<type>process</type><location Id="{loc}"><name>Master thread</name>'
                "<rank>0</rank><type>thread</type></location></locationgroup>"
            )
            loc += 1
        x.append("</systemtreenode>")
    x.append("</systemtreenode>")
    x.append("<topologies></topologies>")
    x.append("</system>")
    x.append("</cube>")
    return "\n".join(x) + "\n"


def location_order(hosts):
    """The columns in the order of the locations: host by host, in order of first
    appearance, as anchor() lists them."""
    return [j for host in dict.fromkeys(hosts) for j, h in enumerate(hosts) if h == host]


def metric_rows(m, new, shift, pos, nloc):
    """The call nodes with a value of CubeMetric m (ascending) and their values [rows x
    locations]: new[i] is table node i's call node less shift (1 where the file adds a
    root), pos[j] the location of column j."""
    if m.values is not None:
        v = np.zeros((len(new), nloc))
        v[new[:, None], pos[None, :]] = m.values
        rows = np.flatnonzero((v != 0).any(axis=1))
        vals, rows = v[rows], rows + shift
    elif m.entries is not None:
        node, col, x = m.entries
        rows, inv = np.unique(new[node] + shift, return_inverse=True)
        vals = np.zeros((len(rows), nloc))
        np.add.at(vals, (inv, pos[col]), x)
    else:
        rows, vals = np.zeros(0, np.int64), np.zeros((0, nloc))
    if m.root is not None or not len(rows):  # pycubexr needs a row: the root's
        root = np.zeros(nloc) if m.root is None else m.root[np.argsort(pos)]
        if len(rows) and rows[0] == 0:
            vals[0] += root
        else:
            rows, vals = np.concatenate([[0], rows]), np.vstack([root, vals])
    return rows, vals


def index_and_data(rows, vals, dtype):
    """The .index and .data files of a metric of CUBE type dtype (DOUBLE, UINT64) with
    values vals [rows x locations] on call nodes rows."""
    if dtype == "DOUBLE":
        data = vals.astype("<f8")
    else:
        data = np.rint(np.maximum(vals, 0)).astype("<u8")
    index = (
        INDEX_MARKER
        + np.array([1], "<u4").tobytes()
        + np.array([0], "<u2").tobytes()
        + bytes([SPARSE])
        + np.array([len(rows)], "<u4").tobytes()
        + np.asarray(rows).astype("<u4").tobytes()
    )
    return index, DATA_MARKER + np.ascontiguousarray(data).tobytes()


def cube_file(table, metrics, hosts, attrs, title):
    """The .cubex file's bytes. metrics: CubeMetrics on the table's nodes and columns."""
    order = callpath_export.depth_first(table)
    new = np.empty(len(order), np.int64)
    new[order] = np.arange(len(order))
    names = [table.names[i] for i in order]
    parent = [int(new[table.parent[i]]) if table.parent[i] >= 0 else -1 for i in order]
    shift = 0
    if sum(1 for p in parent if p < 0) > 1:  # pycubexr, as CUBE's GUI, shows one root
        names = [title] + names
        parent = [-1] + [p + 1 if p >= 0 else 0 for p in parent]
        shift = 1
    regions = {}
    for n in names:
        regions.setdefault(n, len(regions))
    locs = location_order(hosts)
    pos = np.empty(len(locs), np.int64)
    pos[locs] = np.arange(len(locs))
    ranks = callpath_export.column_ranks(table)
    xml = anchor(
        metrics, names, parent, regions, [hosts[j] for j in locs], ranks[locs], attrs, title
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        members = [("anchor.xml", xml.encode())]
        for i, m in enumerate(metrics):
            rows, vals = metric_rows(m, new, shift, pos, len(locs))
            index, data = index_and_data(rows, vals, m.dtype)
            members += [(f"{i}.index", index), (f"{i}.data", data)]
        for name, content in members:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def export(exp, out=None, force=False):
    """Write experiment exp's call-path profile (with its wait states when analysed, and
    the POP useful time) as a CUBE 4 file to out (default EXP/export/profile.cubex).
    Returns a summary dict (path, nodes, ranks, metrics, seconds, notes)."""
    with progress.task("CUBE: reading the profile", 4, "step") as bar:
        return _export(exp, out, force, bar)


def _export(exp, out, force, bar):
    src = callpath_export.load(exp)
    bar.step(what="CUBE: metrics")
    t = src.table
    metrics = []
    for name, (uniq, disp, dtype, uom, descr) in TABLE_METRICS.items():
        metrics.append(CubeMetric(uniq, disp, dtype, uom, descr, t.metrics[name].values))
    taken = {m.uniq for m in metrics} | {POP_USEFUL}
    ws = getattr(src.exp, "waitstates", None)
    if ws is not None:
        metrics += wait_state_metrics(ws, t, src.notes, taken)
    elif (src.exp.path / "traces").is_dir():
        src.notes.append(f"no wait states: the traces are not analysed (perfweave analyze {exp})")
    attrs = callpath_export.run_metadata(src.exp)
    useful, factors = pop_useful_metric(src.exp, t)
    if useful is not None:
        metrics.append(useful)
        attrs.update(factors)
    title = (src.exp.meta or {}).get("program", "") or "program"
    title = title.rsplit("/", 1)[-1]
    bar.step(what="CUBE: building the file")
    data = cube_file(t, metrics, _hosts(src.exp, t), attrs, title)
    bar.step(what="CUBE: writing")
    path = callpath_export.write(exp, out, "profile.cubex", force, data)
    return {
        "path": path,
        "nodes": len(t.names),
        "ranks": len(t.ranks),
        "metrics": len(metrics),
        "seconds": time.perf_counter() - src.started,
        "notes": src.notes,
    }
