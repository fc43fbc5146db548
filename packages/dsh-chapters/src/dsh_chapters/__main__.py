import sys

from dsh_chapters.cli import main

sys.exit(main())
