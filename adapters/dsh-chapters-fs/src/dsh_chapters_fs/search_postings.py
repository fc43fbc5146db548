"""A term's body postings over one segment, packed into one blob (search.md "The search index").

A blob is the rows of one term in one segment, by column: a head (`HEAD`), the documents
holding the term and where each one's rows start, then per row the document, the passage, the
frequency, the passage's words and the term's first mention there, each of the last four in 16
bits where every number fits. A part with many holders also keeps the list of its strongest
holders (`impacts.ImpactList`, after the columns: `_TRAIL`).

A term's blobs are read whole (`read_postings`), or, for a common word, as asked
(`BlobPostings`): its holders and lists first, a lookup's own rows from the blob, every row
only when a walk needs them all.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Literal

from dsh_chapters_core.search import impacts
from dsh_chapters_core.search.impacts import ImpactList
from dsh_chapters_core.search.topk import LOOKUP_ROWS, RowColumns, TermPostings

U32: Literal["I", "L"] = "I" if array("I").itemsize == 4 else "L"
_ROW = 5  # numbers per row: document, passage, frequency, passage words, first mention
_U16: Literal["H"] = "H"


# A blob's head: its rows, the most any passage holds the term, the shortest passage that holds
# it and its holders (unsigned 32-bit numbers in the machine's order), then the width in bytes
# of each column after the documents' (passage, frequency, passage words, first mention).
HEAD = struct.Struct("=4I4B")
# After the head, a blob's parts: its holders, where each holder's rows start (so a lookup
# finds a document's rows from the holders alone, without the rows' documents), then the five
# columns of its rows (`_COLUMNS`: document, passage, frequency, passage words, first mention).
STARTS = 1
_COLUMNS = 2


# A term of a few rows whose numbers all fit 16 bits is packed in one struct call: most of a
# segment's terms are held a few times (a name, a hash, a path), and a flush writes each one
# a blob, so the per-term steps of the general path cost more than its rows.
_FEW_ROWS = 16
# A term with a blob larger than this (a common word's, in a large segment) is read as asked
# (`BlobPostings`), not whole: at 100,000 chapters `kubectl` has six of 0.9 MB.
LAZY_BYTES = 1 << 18
# How many rows of lookups (each counted as top-k counts it, `topk.LOOKUP_ROWS` beyond its own
# rows) make reading every row cheaper: then the rows are read whole.
LOOKUPS_PER_READ = 32
_EVERY_COLUMN = range(_ROW)
_WEIGHTS = (2, 3)  # frequency and passage words: what a ceiling's lookup reads
_ONE_ROW = struct.Struct("=4I4B3I4H")
_PACKERS: dict[tuple[int, int], struct.Struct] = {}
_NARROW = 1 << 16
_LOW = 0 if sys.byteorder == "little" else 1  # which half of a 32-bit number is its low one
# After the columns of a part with `impacts.HOLDERS` holders or more: its list of strongest
# holders, as the average passage length it was computed at, the rest, how many it keeps,
# then their ids (32 bits) and additions (64-bit floats: a bound is never rounded down).
_TRAIL = struct.Struct("=ddI")
_F64 = "d"


def pack_rows(rows: Sequence[int], expected: float = 0.0) -> bytes:
    """A term's rows over a segment (flat: document, passage, frequency, passage words, first
    mention), by column: a head (`HEAD`), the distinct documents holding it (its document
    frequency, without a pass over the rows) and where each one's rows start, then each column
    whole, the last four in 16 bits where every number fits (nearly always). A reader copies
    each column out in one piece, and a common word's postings take 12 bytes a row, not 20.
    With many holders and a door of passages (`expected`, their average length), the list
    (`_TRAIL`)."""
    listed = expected > 0 and impacts.HOLDERS <= _FEW_ROWS  # a few rows may need a list
    if len(rows) == _ROW and max(rows[1], rows[2], rows[3], rows[4]) < _NARROW and not listed:
        doc, passage, tf, length, mention = rows
        return _ONE_ROW.pack(1, tf, length, 1, 2, 2, 2, 2, doc, 0, doc, passage, tf, length,
                             mention)
    if len(rows) <= _ROW * _FEW_ROWS and not listed:
        few = _few_rows_blob(rows)
        if few is not None:
            return few
    flat = rows if isinstance(rows, array) and rows.typecode == U32 else array(U32, rows)
    docs = flat[0::_ROW]
    holders = array(U32, dict.fromkeys(docs))  # in order: the rows are in document order
    columns = [flat[k::_ROW] for k in range(1, _ROW)]
    widths: list[int] = []
    packed = [holders.tobytes(), _starts(docs, holders).tobytes(), docs.tobytes()]
    for column in columns:
        halves = memoryview(column).cast("B").cast("H")
        if halves[1 - _LOW::2].tobytes().strip(b"\0"):  # a number past 16 bits: all 32
            widths.append(4)
            packed.append(column.tobytes())
        else:
            widths.append(2)
            packed.append(halves[_LOW::2].tobytes())
    head = HEAD.pack(len(docs), max(columns[1]), min(columns[2]), len(holders), *widths)
    if len(holders) >= impacts.HOLDERS and expected > 0:
        packed.append(_trail(impacts.impact_list(
            impacts.adds(docs, columns[1], columns[2], expected), expected)))
    return head + b"".join(packed)


def _starts(docs: Sequence[int], holders: Sequence[int]) -> array[int]:
    """Per holder, the first of its rows (a binary search each: holders are fewer than rows)."""
    return array(U32, map(bisect.bisect_left, itertools.repeat(docs, len(holders)), holders))


def _trail(found: ImpactList) -> bytes:
    return b"".join([_TRAIL.pack(found.expected, found.rest, len(found.docs)),
                     array(U32, found.docs).tobytes(), array(_F64, found.adds).tobytes()])


def _impact_list(trail: memoryview) -> ImpactList | None:
    """A part's list from what follows its columns (None when it keeps none)."""
    if not trail:
        return None
    expected, rest, n = _TRAIL.unpack_from(trail)
    docs, adds = array(U32), array(_F64)
    docs.frombytes(trail[_TRAIL.size:_TRAIL.size + 4 * n])
    adds.frombytes(trail[_TRAIL.size + 4 * n:_TRAIL.size + 12 * n])
    return ImpactList(docs, adds, rest, expected)


def _few_rows_blob(rows: Sequence[int]) -> bytes | None:
    """`pack_rows` of a few rows in one struct call; None when a number needs 32 bits."""
    passage, tf, length, mention = (rows[k::_ROW] for k in range(1, _ROW))
    most = max(tf)
    if max(max(passage), most, max(length), max(mention)) >= _NARROW:
        return None
    docs = rows[0::_ROW]
    holders = dict.fromkeys(docs)
    n = len(docs)
    packer = _PACKERS.get((len(holders), n))
    if packer is None:
        packer = _PACKERS[(len(holders), n)] = struct.Struct(
            f"=4I4B{2 * len(holders) + n}I{4 * n}H")
    starts = [at for at in range(n) if not at or docs[at] != docs[at - 1]]
    return packer.pack(n, most, min(length), len(holders), 2, 2, 2, 2, *holders, *starts,
                       *docs, *passage, *tf, *length, *mention)


def blob_parts(blob: bytes) -> tuple[tuple[int, ...], list[memoryview], memoryview]:
    """A blob's head, its seven parts (holders, their rows' starts, then the five columns) and
    what follows them (its list, or nothing), as views."""
    head = HEAD.unpack_from(blob)
    rows, holders = head[0], head[3]
    sizes = [4 * holders, 4 * holders, 4 * rows, *(w * rows for w in head[4:])]
    view = memoryview(blob)
    parts, at = [], HEAD.size
    for size in sizes:
        parts.append(view[at:at + size])
        at += size
    return head, parts, view[at:]


def _width(head: tuple[int, ...], k: int) -> int:
    """Bytes per number of column k (0: the documents, always 32 bits; then the head's)."""
    return 4 if k == 0 else head[3 + k]


def _extend(column: array[int] | None, part: memoryview, width: int) -> array[int]:
    """`column` with one blob's part of it appended: copied in one piece when the widths
    agree, else widened to 32 bits (a column past 16 bits is rare)."""
    if column is None:
        column = array(U32 if width == 4 else _U16)
    if column.itemsize == width:
        column.frombytes(part)
        return column
    if column.itemsize < width:  # widen what was read so far
        column = array(U32, column)
        column.frombytes(part)
        return column
    narrow = array(_U16)
    narrow.frombytes(part)
    column.extend(array(U32, narrow))
    return column


def unpack_rows(blobs: Iterable[bytes],
            dead: AbstractSet[int] = frozenset()) -> tuple[array[int], array[int]]:
    """A term's (holders, rows) from segment blobs in segment order (so in document order),
    the rows flat as `pack_rows` takes them; with `dead`, those documents' rows are dropped (a
    merge)."""
    _, holders, columns, _ = _read_columns(blobs)
    rows = array(U32, bytes(4 * _ROW * len(columns[0])))
    for k, column in enumerate(columns):
        rows[k::_ROW] = column if column.itemsize == 4 else array(U32, column)
    if dead and not dead.isdisjoint(holders):
        kept = array(U32)
        for at in range(0, len(rows), _ROW):
            if rows[at] not in dead:
                kept.extend(rows[at:at + _ROW])
        rows = kept
        holders = array(U32, (d for d in holders if d not in dead))
    return holders, rows


def _joined_head(heads: Sequence[tuple[int, ...]]) -> tuple[int, int, int, int]:
    """The head of these blobs' rows taken together, from their heads (adjacent segments, no
    document in two), less the widths."""
    return (sum(h[0] for h in heads), max(h[1] for h in heads), min(h[2] for h in heads),
            sum(h[3] for h in heads))


def merge_blobs(blobs: Sequence[bytes], dead: AbstractSet[int], expected: float = 0.0) -> bytes:
    """A term's blobs of adjacent segments as one blob (empty when no row is left): what
    `pack_rows(unpack_rows(blobs, dead), expected)` gives, but for the list. A merge without dead
    documents among the term's holders (every merge an import makes) joins the parts as they
    are, column by column, from their heads, so it never unpacks a row: most terms are rare,
    and this is most of a merge. Their lists are merged (`impacts.merged_list`), a part
    without one adding its holders. Parts of other widths are joined by unpacking (a column
    past 16 bits is rare)."""
    if len(blobs) == 1 and not dead:
        return blobs[0]
    split = [blob_parts(b) for b in blobs]
    heads = [h for h, _, _ in split]
    holders = array(U32)
    if dead:
        for _, parts, _ in split:
            holders.frombytes(parts[0])
    if not dead.isdisjoint(holders) or len({h[4:] for h in heads}) > 1:
        _, rows = unpack_rows(blobs, dead)
        return pack_rows(rows, expected) if rows else b""
    joined = _joined_head(heads)
    head = HEAD.pack(*joined, *heads[0][4:])
    starts, base = array(U32), 0
    for h, parts, _ in split:  # each part's starts moved past the rows before it
        part = array(U32)
        part.frombytes(parts[STARTS])
        starts.extend(map(base.__add__, part) if base else part)
        base += h[0]
    out: list[bytes | memoryview] = [
        head, *(parts[0] for _, parts, _ in split), starts.tobytes(),
        *(parts[k] for k in range(_COLUMNS, _COLUMNS + _ROW) for _, parts, _ in split)]
    if joined[3] >= impacts.HOLDERS and expected > 0:
        out.append(_trail(_joined_list(split, expected)))
    return b"".join(out)


def _joined_list(split: Sequence[tuple[tuple[int, ...], list[memoryview], memoryview]],
                 expected: float) -> ImpactList:
    """The list of adjacent parts: theirs merged, with the holders of a part that keeps none
    (it had too few) added from its rows."""
    lists: list[ImpactList] = []
    walked: dict[int, float] = {}
    for head, parts, trail in split:
        found = _impact_list(trail)
        if found is not None:
            lists.append(found)
            continue
        docs, tf, length = (_extend(None, parts[_COLUMNS + k], _width(head, k))
                            for k in (0, 2, 3))
        walked.update(impacts.adds(docs, tf, length, expected))
    return impacts.merged_list(lists, walked, expected)


def _read_columns(blobs: Iterable[bytes]) -> tuple[
        list[tuple[int, ...]], array[int], list[array[int]], list[ImpactList | None]]:
    """A term's heads, holders, five columns and per blob its list (or None) from segment
    blobs in segment order, each blob's parts copied out whole and the blob let go before the
    next is read: a common word's postings are held once, not as blobs and columns together."""
    heads: list[tuple[int, ...]] = []
    holders = array(U32)
    columns: list[array[int] | None] = [None] * _ROW
    lists: list[ImpactList | None] = []
    for blob in blobs:
        head, parts, trail = blob_parts(blob)
        heads.append(head)
        holders.frombytes(parts[0])
        for k in range(_ROW):
            columns[k] = _extend(columns[k], parts[_COLUMNS + k], _width(head, k))
        lists.append(_impact_list(trail))
    return heads, holders, [array(U32) if c is None else c for c in columns], lists


def read_postings(blobs: Iterable[bytes]) -> TermPostings | None:
    """A term's postings from its segment blobs in segment order (None when no row is left).
    The bounds over every row are the blobs' own (their heads), so no row is read to find
    them. Each column is its parts joined once and viewed as numbers, not copied again into
    an array grown part by part: for a common word's 20 MB that took 29 ms against 8 ms,
    most of it the growing."""
    kept = list(blobs)
    split = [blob_parts(b) for b in kept]
    heads = [h for h, _, _ in split]
    if not heads or not sum(h[0] for h in heads):
        return None
    columns: Sequence[Sequence[int]]
    holders: Sequence[int]
    if len({h[4:] for h in heads}) > 1:  # a column past 16 bits in some part: widened (rare)
        heads, holders, columns, lists = _read_columns(kept)
    else:
        codes = (U32, U32, *(U32 if w == 4 else _U16 for w in heads[0][4:]))
        holders, *columns = (
            _view([parts[k] for _, parts, _ in split], code)
            for k, code in zip((0, *range(_COLUMNS, _COLUMNS + _ROW)), codes, strict=True))
        lists = [_impact_list(trail) for _, _, trail in split]
    docs, passage, tf, length, mention = columns
    _, most, shortest, _ = _joined_head(heads)
    return TermPostings(docs, passage, tf, length, most, shortest, mention, holders,
                        [(h[0], found) for h, found in zip(heads, lists, strict=True)])


class BlobPostings:
    """A common word's postings read from its blobs as they are asked for (SQLite's
    incremental blob I/O): its holders, their rows' starts and its lists at once, a lookup's
    own rows from the blob, and every column only when a walk needs them all. A question
    answered from a common word's lists (`topk.take_lists`) then reads its holders, not its
    20 MB of rows. Lookups that have read more than a share of the rows read them all (each
    lookup is a few reads; the whole read is one). The blobs are open until `close`, inside
    the index's read transaction, so every read sees the rows the holders came from."""

    __slots__ = ("_blobs", "_columns", "_holder_base", "_looked", "_offsets", "_row_base",
                 "_starts", "_widths", "holders", "most", "parts", "rows", "shortest")

    def __init__(self, db: sqlite3.Connection, rowids: Sequence[int]) -> None:
        self._blobs: list[sqlite3.Blob] = []
        self._offsets: list[list[int]] = []  # per part: where each column starts in its blob
        self._widths: list[tuple[int, ...]] = []
        self._starts: list[memoryview] = []
        self._holder_base: list[int] = []  # per part: the holders and rows before it
        self._row_base: list[int] = []
        self._columns: RowColumns | None = None
        self._looked = 0
        heads: list[tuple[int, ...]] = []
        holders: list[memoryview] = []
        lists: list[ImpactList | None] = []
        for rowid in rowids:
            blob = db.blobopen("postings", "data", rowid, readonly=True)
            self._blobs.append(blob)
            head = HEAD.unpack(blob.read(HEAD.size))
            rows, count = head[0], head[3]
            near = memoryview(blob.read(8 * count))
            holders.append(near[:4 * count])
            self._starts.append(near[4 * count:].cast(U32))
            widths = (4, *head[4:])
            at = HEAD.size + 8 * count
            offsets = []
            for w in widths:
                offsets.append(at)
                at += w * rows
            blob.seek(at)
            lists.append(_impact_list(memoryview(blob.read())))
            self._holder_base.append(self._holder_base[-1] + heads[-1][3] if heads else 0)
            self._row_base.append(self._row_base[-1] + heads[-1][0] if heads else 0)
            self._offsets.append(offsets)
            self._widths.append(widths)
            heads.append(head)
        self.holders = _view(holders, U32)
        self.parts = [(h[0], found) for h, found in zip(heads, lists, strict=True)]
        self.rows, self.most, self.shortest, _ = _joined_head(heads)

    def close(self) -> None:
        for blob in self._blobs:
            blob.close()

    def _all(self) -> RowColumns:
        if self._columns is None:
            blobs = []
            for blob in self._blobs:
                blob.seek(0)
                blobs.append(blob.read())
            found = read_postings(blobs)
            assert found is not None
            self._columns = (found.docs, found.passage, found.tf, found.length, found.mention)
        return self._columns

    @property
    def docs(self) -> Sequence[int]:
        return self._all()[0]

    @property
    def passage(self) -> Sequence[int]:
        return self._all()[1]

    @property
    def tf(self) -> Sequence[int]:
        return self._all()[2]

    @property
    def length(self) -> Sequence[int]:
        return self._all()[3]

    @property
    def mention(self) -> Sequence[int]:
        return self._all()[4]

    def span(self, doc: int) -> tuple[int, int]:
        holders = self.holders
        j = bisect.bisect_left(holders, doc)
        if j == len(holders) or holders[j] != doc:
            return 0, 0
        k = bisect.bisect_right(self._holder_base, j) - 1
        local, starts = j - self._holder_base[k], self._starts[k]
        end = starts[local + 1] if local + 1 < len(starts) else self.parts[k][0]
        return self._row_base[k] + starts[local], self._row_base[k] + end

    def rows_at(self, lo: int, hi: int, *, weights: bool = False) -> tuple[int, RowColumns]:
        if self._columns is None:
            self._looked += hi - lo + LOOKUP_ROWS
            if self._looked * LOOKUPS_PER_READ < self.rows:
                return lo, self._cut(lo, hi, _WEIGHTS if weights else _EVERY_COLUMN)
        return 0, self._all()

    def _cut(self, lo: int, hi: int, which: Sequence[int]) -> RowColumns:
        """Rows lo..hi-1 (of one part) read from its blob: the columns `which` names (the
        others empty)."""
        k = bisect.bisect_right(self._row_base, lo) - 1
        local = lo - self._row_base[k]
        blob, offsets, widths = self._blobs[k], self._offsets[k], self._widths[k]
        columns: list[Sequence[int]] = [(), (), (), (), ()]
        for c in which:
            w = widths[c]
            blob.seek(offsets[c] + w * local)
            columns[c] = memoryview(blob.read(w * (hi - lo))).cast(U32 if w == 4 else _U16)
        return columns[0], columns[1], columns[2], columns[3], columns[4]


def _view(parts: Sequence[memoryview], code: Literal["I", "L", "H"]) -> memoryview:
    """One column from its parts, as numbers of type `code`: a lone part as it is (no copy)."""
    joined = parts[0] if len(parts) == 1 else memoryview(b"".join(parts))
    return joined.cast("B").cast(code)
