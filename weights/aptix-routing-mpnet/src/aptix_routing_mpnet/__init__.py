"""The weights of aptix's larger workflow-matching encoder (no code: aptix loads the files)."""
