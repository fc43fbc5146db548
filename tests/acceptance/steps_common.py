"""Steps and fixtures every feature shares: machines (workspaces with their own DSH_HOME and
harness id), run through the composition root."""
