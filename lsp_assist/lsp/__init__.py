"""LSP: thin pygls handlers over the serving engine."""
