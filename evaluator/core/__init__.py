"""Core: connections, the embedded server, install/upgrade, errors, masking, ids."""
