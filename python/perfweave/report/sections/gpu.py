"""The GPU section (runtime/modules/gpu.c; docs/gpu.md): per rank, device and stream, the
kernels by demangled name, the copies by direction with bytes and rates, each device's
busy share and the host's time waiting for the GPU. Absent from the report when no
process loaded CUDA; one line per process whose GPU activity could not be recorded
(CUPTI missing, ...)."""

from perfweave.analysis.gpu import analyze
from perfweave.report.section import Section
from perfweave.report.summary import duration as _t
from perfweave.report.widgets import (
    byte_size,
    cut_rows,
    escape,
    html_table,
    more_rows,
    text_table,
    wrap_line,
)


class GpuSection(Section):
    name = "gpu"

    def collect(self, experiment, report, top):
        gpu = experiment.gpu
        if not gpu and not gpu.notes:
            return {}
        return {"gpu": analyze(gpu).to_json()}

    def text(self, data, view):
        g = data.get("gpu")
        if not g:
            return []
        out = ["", "GPU activity (CUDA, through CUPTI)"]
        out += wrap_line("summary", _summary(g), view.width)
        for title, key, cols, row in _TABLES:
            if g[key]:
                shown, more = cut_rows(g[key], view.max_rows)
                out += [f"  {title}:"]
                out += text_table([row(r) for r in shown], cols, width=view.width)
                out += more_rows(more, title.lower())
        out += [f"  {line}" for line in g["lines"]]
        out += [f"  note: {n}" for n in g["notes"]]
        return out

    def html(self, data, page):
        g = data.get("gpu")
        if not g:
            return []
        out = ["<h2>GPU activity</h2>", f"<p>{escape(_summary(g))}</p>"]
        for title, key, cols, row in _TABLES:
            if g[key]:
                out += [f"<h3>{escape(title)}</h3>", html_table([row(r) for r in g[key]], cols)]
        out += [f"<p class=note>{escape(x)}</p>" for x in g["lines"] + g["notes"]]
        return out


def _summary(g):
    if not g["active"]:
        return f"{g['processes']} process(es) loaded CUDA; no GPU activity was recorded"
    s = (
        f"{g['launches']:,} kernel launches, {_t(g['kernel_s'])} of kernels; "
        f"{byte_size(g['copy_bytes'])} copied in {_t(g['copy_s'])}; "
        f"the host waited {_t(g['gpu_wait_s'])} for the GPU"
    )
    if g["dropped"] or g["lost"]:
        s += f"; {g['dropped']:,} records dropped by CUPTI, {g['lost']:,} not kept"
    return s


def _who(r):
    return f"rank {r['rank']}" if r["rank"] >= 0 else "process"


_TABLES = [
    (
        "Per rank",
        "per_rank",
        ["rank", "kernels", "copies", "GPU wait", "wait %", "dropped"],
        lambda r: [
            _who(r), _t(r["kernel_s"]), _t(r["copy_s"]), _t(r["gpu_wait_s"]),
            f"{r['gpu_wait_pct']:.1f}", f"{r['dropped']:,}",
        ],
    ),
    (
        "Devices",
        "devices",
        ["rank", "device", "busy", "busy %", "idle %"],
        lambda r: [
            _who(r), r["device"], _t(r["busy_s"]), f"{r['busy_pct']:.1f}", f"{r['idle_pct']:.1f}"
        ],
    ),
    (
        "Kernels",
        "kernels",
        ["rank", "dev", "stream", "kernel", "grid", "block", "launches", "time", "mean"],
        lambda r: [
            _who(r), r["device"], r["stream"], r["name"], r["grid"], r["block"],
            f"{r['launches']:,}", _t(r["time_s"]), _t(r["mean_s"]),
        ],
    ),
    (
        "Copies",
        "copies",
        ["rank", "dev", "stream", "direction", "memory", "count", "bytes", "time", "GB/s"],
        lambda r: [
            _who(r), r["device"], r["stream"], r["direction"],
            f"{r['src_kind'] or '-'} -> {r['dst_kind']}", f"{r['count']:,}",
            byte_size(r["bytes"]), _t(r["time_s"]), f"{r['rate_gbs']:.2f}",
        ],
    ),
    (
        "Host waits for the GPU",
        "syncs",
        ["rank", "stream", "wait", "count", "time", "longest"],
        lambda r: [
            _who(r), r["stream"] if r["stream"] >= 0 else "-", r["type"], f"{r['count']:,}",
            _t(r["time_s"]), _t(r["max_s"]),
        ],
    ),
]  # fmt: skip

SECTION = GpuSection()
