from dsh_chapters.cli import entry

entry()
