"""Problem definitions: loading, validation and the registry (stage 1 of the pipeline)."""
