"""Model enrichment (§6): async, provenance-tagged, re-runnable, never on the critical path.

Split along its seams: `queue` (what is queued and how each attempt went, read by status and
after every push), `outcome` (one attempt's record), `ladder` (one chapter's steps), `run` (a
drain), `chapter`, `proposal` and `slice`. Callers import from the module that holds a name;
this package loads none of them by itself, so reading the queue never loads the model door or
the redaction engine."""
