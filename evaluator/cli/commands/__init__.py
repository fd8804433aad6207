"""Click commands, one module per command group; each calls a library function and formats."""
