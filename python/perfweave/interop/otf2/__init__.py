"""OTF2 archives through the `otf2` package (PyPI): `export` writes an experiment's traces
as an OTF2 archive, `import_archive` turns an OTF2 archive (Score-P's, or one written by
`export`) into an experiment that `perfweave analyze` reads. What maps to what, and what
is lost either way, is in docs/interop.md.

The otf2 package hands events over one Python call at a time. Both directions therefore
prepare everything they can as numpy columns first (which record becomes which OTF2
event, its arguments, the order of a location's events) and leave only the calls into
the library to the loop. Where libperfweave-otf2.so is built, both loops are in C: the
export's calls the library's writer functions for a block of events at a time
(runtime/interop/otf2_bulk.c), the import's callbacks put each event the library's
reader hands over in numpy columns (runtime/interop/otf2_read.c), with no Python call
per event. Where it is not, the loops use the package's `_otf2` layer (the functions
its own `EventWriter` and `BufferedEventReader` call) rather than building an event
object per event: one ctypes call per event written, one Python callback per event read.

The export holds one chunk of a rank's records at a time (interop.RankExportStream): a
location's events are sorted a chunk at a time with those held back from the chunks
before, and written as far as no later chunk can come before them; what the events of
a chunk need from other chunks is carried, or found by a first pass over the rank. The
archive is the same, byte for byte, as with the whole rank at once.

The modules:

- `exporter`: `export`, the archive's definitions, the ranks written chunk by chunk;
- `columns`: the OTF2 events of a chunk of records, as numpy columns;
- `stream`: what a chunk carries to the next, the first pass, a location's writer;
- `calls`: the event kinds written (mpi.spec's section otf2) and the calls of the OTF2
  library that write them (the C loop of libperfweave-otf2.so, or one ctypes call per
  event);
- `importer`: `import_archive`, the archive's definitions, the experiment written;
- `bulk`: the events read by the C callbacks of libperfweave-otf2.so into one table;
- `collector`: the events read by Python callbacks, by kind, into one table (where
  libperfweave-otf2.so is not built);
- `records`: a location's events as perfweave's records;
- `mapping`: perfweave's terms in OTF2's, for both directions;
- `implied`: what an OTF2 event leaves implicit (a record's flags, a receive request's
  details), derived alike by both directions;
- `library`: errors, messages and memory of the otf2 package and the OTF2 library.
"""

from perfweave.interop.otf2.exporter import export
from perfweave.interop.otf2.importer import import_archive

__all__ = ["export", "import_archive"]
