"""The tables of the analyses' typed results (SamplesResult, MpiProfileResult,
WaitStatesResult, NodeTimelineResult): numpy structured arrays, one field per column in a
stable order, numbers as int64, float64 or bool, text (and other Python values) as object
fields. numpy only, so that `perfweave report` needs no pandas; the Python API makes each a
DataFrame (`pd.DataFrame(table)`), the report's JSON reads the rows back as plain values
(`records`)."""

import numpy as np


def column(values):
    """One column: a numeric or bool array as it is; anything else (str, None, a mix) as
    an object array, one Python value per row."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        return values
    values = list(values)
    if values and all(isinstance(v, (bool, np.bool_)) for v in values):  # a bool is an int
        return np.array(values, bool)
    if values and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values
    ):
        return np.array(values, np.int64)
    if values and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        for v in values
    ):
        return np.array(values, np.float64)
    out = np.empty(len(values), object)
    for i, v in enumerate(values):  # one by one: a list stays one value
        out[i] = v
    return out


def table(columns, length=None):
    """A structured array of columns ({name: values}, in order; each as `column`). An
    empty column takes `length`'s rows of 0 (a table of no rows: float64 columns)."""
    cols = {k: column(v) for k, v in columns.items()}
    n = length if length is not None else max((len(c) for c in cols.values()), default=0)
    out = np.zeros(n, [(k, c.dtype) for k, c in cols.items()])
    for k, c in cols.items():
        if len(c):
            out[k] = c
    return out


def records(t, names=None):
    """The rows of table t as dicts of plain Python values (int, float, bool, str), of
    the columns names (default: all, in order)."""
    names = list(t.dtype.names if names is None else names)
    return [dict(zip(names, row)) for row in t[names].tolist()] if len(t) else []
