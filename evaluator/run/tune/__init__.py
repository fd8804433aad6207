"""`pgeval tune`: a stage's options (merge: method, k, weights, input depths, depth; rerank: top_n)
tried on the experiment's stored input lists in SQL, each configuration measured without being
written, the choice among them cross-validated, and a change recommended only when its held-out
gain over the experiment's own configuration is significant (docs/tune.md)."""
