"""Reading one transcript at the application's edge: whatever a reader meets, the caller gets
a `Transcript` or an `InputError` (one line, exit 1), never a traceback.

The readers guard their own boundary (non-regular files, the line cap, nesting, lone
surrogates: `dsh_chapters_harness.input_guard`); this is the net behind them, for a record of
a shape no reader expected (a number where a string belongs), and the id check: a session id
becomes a directory name, so an overlong or unsafe one is refused before anything is written.
"""

from __future__ import annotations

from dsh_chapters_core.errors import ChaptersError, InputError
from dsh_chapters_core.events import Transcript
from dsh_chapters_core.pool_layout import check_session_id
from dsh_chapters_core.ports.harness import HarnessReader

from dsh_chapters.app import App

# What a reader raises on a record of an unexpected shape; anything else is a bug and shows.
SHAPE_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError,
                UnicodeError, OverflowError)


def read_guarded(app: App, reader: HarnessReader, path: str) -> Transcript:
    with app.factories.reader_limits(app.config):
        try:
            transcript = reader.read(path)
        except ChaptersError:
            raise
        except SHAPE_ERRORS as exc:
            raise InputError(
                f"{path}: a record the reader cannot read ({type(exc).__name__}); nothing "
                "was archived",
                hint="check that this is an unedited session file of the harness you named",
            ) from None
    check_session_id(transcript.session_id, path, app.config.session_id_max_chars)
    if transcript.root_session_id:
        check_session_id(transcript.root_session_id, path, app.config.session_id_max_chars)
    return transcript
