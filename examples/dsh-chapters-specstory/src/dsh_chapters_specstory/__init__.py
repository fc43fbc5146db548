"""A dsh-chapters harness reader for SpecStory markdown exports (`.specstory/history/*.md`)."""
