"""The integer grouping the trace analysis rests on (model/grouping.py) and the record
type sets (perfweave/dtypes.py TypeSet): each path of them against numpy's sorting
equivalents, on keys built to take that path."""

import numpy as np
import pytest

from perfweave.model.grouping import dense_ids, rank_in_group
from perfweave.dtypes import EVENT_TYPES, TypeSet

RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "keys",
    [
        np.full(1000, 7, np.int32),  # one key
        np.full(40000, -(2**62), np.int64),  # one key, far from 0
        RNG.integers(-5, 50, 3000).astype(np.int16),  # a small range: a table
        RNG.integers(0, 2**40, 100).astype(np.int64),  # few rows: np.unique
        RNG.choice(RNG.integers(-(2**62), 2**62, 300), 100000),  # few keys, wide: hashing
        RNG.integers(-(2**62), 2**62, 100000),  # many distinct: sorting
        np.zeros(0, np.int64),
    ],
    ids=["one", "one-far", "range", "few-rows", "hashed", "distinct", "empty"],
)
def test_dense_ids_maps_every_row_to_its_key(keys):
    uniq, inv = dense_ids(keys)
    assert inv.dtype == np.int64 and uniq.dtype == keys.dtype
    assert len(np.unique(uniq)) == len(uniq) == len(np.unique(keys))
    assert np.array_equal(uniq[inv], keys)


def test_rank_in_group_counts_earlier_rows_of_the_group():
    ids = RNG.integers(0, 5, 2000)
    expect = np.array([np.count_nonzero(ids[:i] == g) for i, g in enumerate(ids)])
    assert np.array_equal(rank_in_group(ids, 5), expect)
    order = RNG.permutation(len(ids))  # rows counted in this order instead
    by_order = np.empty(len(ids), np.int64)
    by_order[order] = [np.count_nonzero(ids[order[:k]] == ids[order[k]]) for k in range(len(ids))]
    assert np.array_equal(rank_in_group(ids, 5, order), by_order)


def test_type_sets_agree_with_membership_for_every_code():
    codes = np.arange(256, dtype=np.uint8)
    names = list(EVENT_TYPES)
    for k in range(60):
        chosen = [n for n in names if RNG.random() < 0.4] or [names[0]]
        ts = TypeSet(*chosen)
        want = np.isin(codes, [EVENT_TYPES[n] for n in chosen])
        assert np.array_equal(ts(codes), want), chosen  # comparisons
        assert np.array_equal(ts[codes.astype(np.int64)], want), chosen  # lookup table
        assert np.array_equal(ts(codes[::3]), want[::3])  # strided view
