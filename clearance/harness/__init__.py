"""The runtime: tools, sessions, the pipeline, asks and the journal."""
