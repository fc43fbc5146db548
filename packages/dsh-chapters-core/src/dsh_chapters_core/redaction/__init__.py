"""The credential families (§9): the rules as data plus small finders, and the one scan.

`dsh_chapters_core.redact` is the public face (`redact`, `find_secrets`, `FAMILIES`); this
package holds the families: provider tokens by shape (`tokens`), structures such as private
keys, JWTs and URLs (`structures`), key-named values in every config syntax (`assignments`),
command-line passwords (`commands`), and the combined scan that runs them (`engine`).
"""
