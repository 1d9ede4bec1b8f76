"""Record formats: RecordBatch v2 and the legacy v0/v1 message sets, their compression codecs.

`header` is the hot-path view (no record decoding); `batch` builds and reads whole batches.
"""

from __future__ import annotations
