"""DBA tools: health, warm-up, fingerprint and diff, sweeps."""
