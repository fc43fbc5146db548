"""A knowledge pool that is a plain directory (Syncthing, Dropbox, a network share)."""
