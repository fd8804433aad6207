"""The state of the user's table (below run/ and ground_truth/): fingerprint and config diff,
data checksum and change log, health, warm-up, scratch copies and their layout."""
