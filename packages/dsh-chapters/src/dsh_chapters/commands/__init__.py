"""Command families of the `chapters` CLI; each exposes `register(subparsers, common)`."""
