"""The sync use case (§5), split along its seams: `state` (what is persisted and printed),
`copy` (what crosses between store and mirror, validated on the way in) and `run` (the loop
under the writer lock).

Callers import from the module that holds a name. This package loads none of them by itself:
a search in a linked workspace reads the quarantine list (`state`) and must not pay for the
sync loop, its transports and its remote parser at every question."""
