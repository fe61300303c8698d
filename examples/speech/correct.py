"""Boundary correction: the systematic offset between where the HMM puts a
phone's first frame and where espeak-ng reports the phone to start.

espeak-ng's phoneme events do not sit where the spectrum changes, and how far
off they are depends on the phones around the boundary (the boundary into a
pause is found some 40 ms after espeak's event, into a voiceless stop some 30
ms before: the closure counts to the phone before). A trained model finds
its own boundary consistently, so the offset per kind of boundary is learnt
from the training utterances' alignments against their true starts, and
subtracted from the boundaries found on held-out utterances. Nothing of the
held-out utterances enters the offsets.

The kind of a boundary is its (left phone, right phone) pair where the
training data has at least `min_count` of them, else its right phone, else
its left phone, else none (the global offset). The offset is the median
signed error (robust to the few boundaries the alignment gets badly wrong),
shrunk towards the next coarser level by count / (count + shrink).

Measured (bench/results/speech.md, 100 training utterances): the offsets
are specific to the pair (min_count 2 beats 8, and 30 loses 2 points within
20 ms); a third phone of context (triples) does not help on that much data.
"""

import numpy as np


class BoundaryCorrection:
    """Offsets (ms) by kind of boundary; fit on training data, apply anywhere."""

    def __init__(self, min_count=2, shrink=1.0):
        if min_count < 1:
            raise ValueError(f"BoundaryCorrection: min_count must be >= 1, got {min_count}")
        if shrink < 0:
            raise ValueError(f"BoundaryCorrection: shrink must be >= 0, got {shrink}")
        self.min_count = int(min_count)
        self.shrink = float(shrink)
        self.global_offset = 0.0
        self.levels = ({}, {}, {})   # by (left, right), by right, by left

    @staticmethod
    def _keys(phones):
        """The (left, right) pair of every boundary of one utterance."""
        return list(zip(phones[:-1], phones[1:]))

    def fit(self, errors, phone_lists):
        """errors: per utterance, found - true boundary (ms) of phones
        1..L-1; phone_lists: per utterance, its L phone names. Returns self."""
        e = np.concatenate([np.asarray(x, np.float64) for x in errors])
        pairs = [k for ph in phone_lists for k in self._keys(ph)]
        if len(pairs) != e.size:
            raise ValueError("BoundaryCorrection.fit: errors and phones do not match")
        if e.size == 0:
            raise ValueError("BoundaryCorrection.fit: no boundaries")
        self.global_offset = float(np.median(e))
        groups = ({}, {}, {})
        for (a, b), x in zip(pairs, e):
            groups[0].setdefault((a, b), []).append(x)
            groups[1].setdefault(b, []).append(x)
            groups[2].setdefault(a, []).append(x)
        right, left = groups[1], groups[2]
        by_right = {k: self._shrunk(v, self.global_offset) for k, v in right.items()
                    if len(v) >= self.min_count}
        by_left = {k: self._shrunk(v, self.global_offset) for k, v in left.items()
                   if len(v) >= self.min_count}
        by_pair = {}
        for (a, b), v in groups[0].items():
            if len(v) >= self.min_count:
                parent = by_right.get(b, by_left.get(a, self.global_offset))
                by_pair[(a, b)] = self._shrunk(v, parent)
        self.levels = (by_pair, by_right, by_left)
        return self

    def _shrunk(self, values, parent):
        n = len(values)
        return (n * float(np.median(values)) + self.shrink * parent) / (n + self.shrink)

    def offset(self, left, right):
        by_pair, by_right, by_left = self.levels
        for table, key in ((by_pair, (left, right)), (by_right, right), (by_left, left)):
            if key in table:
                return table[key]
        return self.global_offset

    def apply(self, found_ms, phones):
        """Corrected boundaries (ms, float64) of one utterance: found_ms of
        phones 1..L-1 minus their offsets, kept non-decreasing."""
        found = np.asarray(found_ms, np.float64)
        off = np.array([self.offset(a, b) for a, b in self._keys(phones)], np.float64)
        if off.size != found.size:
            raise ValueError("BoundaryCorrection.apply: found_ms needs len(phones) - 1 values")
        return np.maximum.accumulate(found - off) if found.size else found
