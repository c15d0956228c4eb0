"""In-memory models that analyses work on."""
