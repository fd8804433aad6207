"""`pgeval demo`: the whole flow on the embedded server with a generated knowledge base."""
